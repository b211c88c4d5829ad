set -e
printf 'gold\nteal\nred\ncyan\nblue\npink\ngreen\n' | cmp - unique.txt
