#!/bin/bash
cd /workspace
if [ -x bin/upper.sh ] && [ "$(./bin/upper.sh)" = 'ABC' ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
