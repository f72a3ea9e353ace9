#!/bin/bash
cd /workspace
if [ -x bin/hello.sh ] && [ "$(./bin/hello.sh)" = 'hello' ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
