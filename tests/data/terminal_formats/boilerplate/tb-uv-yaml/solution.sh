#!/bin/bash
cd /app
awk '{ print $1 ": " $2 }' ports.txt > ports.yaml
