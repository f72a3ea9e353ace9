#!/bin/bash
cd /workspace
if [ -x bin/count.sh ] && [ "$(./bin/count.sh)" = '3' ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
