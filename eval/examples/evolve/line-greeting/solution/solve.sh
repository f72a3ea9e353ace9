#!/bin/bash
printf '%s\n' 'hello, world' > /workspace/greeting.txt
