#!/bin/bash
sort -u /app/words.txt > /app/unique.txt
