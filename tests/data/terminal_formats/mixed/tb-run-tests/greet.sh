#!/bin/bash
echo "Hi $1"
