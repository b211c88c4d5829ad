#!/bin/sh
i=5
while [ $i -ge 0 ]; do
    echo $i
    i=$((i - 1))
done
