#!/bin/bash
if printf '%s\n' 'hello, world' | cmp -s - /workspace/greeting.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
