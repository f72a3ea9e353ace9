#!/bin/bash
printf '%s\n' 'name,age,city' > /workspace/header.csv
