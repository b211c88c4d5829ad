set -e
printf 'app.js\nfonts/a.woff\nimg/icons/x.svg\nimg/logo.png\n' | cmp - manifest.txt
