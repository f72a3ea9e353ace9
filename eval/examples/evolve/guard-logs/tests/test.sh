#!/bin/bash
if [ "$(cat /workspace/logs/app.log)" = started ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
