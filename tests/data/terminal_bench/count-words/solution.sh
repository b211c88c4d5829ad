#!/bin/bash
# Terminal-Bench runs the reference solution as one script.
cd /app
wc -w < poem.txt > count.txt
