#!/bin/bash
want=$'app/main.py\napp/util/slow.py\ndocs/notes.md'
got=$(cat /workspace/todo.txt 2>/dev/null)
echo "todo.txt: $got"
if [ "$got" = "$want" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
