#!/bin/bash
if printf '%s\n' '42' | cmp -s - /workspace/answer.txt; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
