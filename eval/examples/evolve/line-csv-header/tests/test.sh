#!/bin/bash
if printf '%s\n' 'name,age,city' | cmp -s - /workspace/header.csv; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
