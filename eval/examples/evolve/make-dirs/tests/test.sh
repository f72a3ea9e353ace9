#!/bin/bash
cd /workspace
if [ -d src ] && [ -d docs ] && [ -d tests ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
