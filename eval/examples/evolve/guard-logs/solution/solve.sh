#!/bin/bash
mkdir -p /workspace/logs && echo started > /workspace/logs/app.log
