#!/bin/bash
cd /workspace
if [ -x bin/sum.sh ] && [ "$(./bin/sum.sh)" = '5' ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
