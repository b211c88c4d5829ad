#!/bin/bash
cd /app && sort words.txt > out/sorted.txt
