#!/bin/bash
sed -i 's/return a - b/return a + b/' calc.py
python3 -m unittest -q
