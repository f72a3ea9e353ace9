#!/bin/bash
cd /workspace/src
grep -rl TODO . | sed 's|^\./||' | LC_ALL=C sort > /workspace/todo.txt
