#!/bin/bash
cd /workspace
if [ -x bin/join.sh ] && [ "$(./bin/join.sh)" = 'a-b' ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
