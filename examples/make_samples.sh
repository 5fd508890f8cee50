#!/usr/bin/env bash
# Regenerates the sample documents and photos of this folder with ImageMagick (package
# imagemagick) and the DejaVu fonts (fonts-dejavu-core). The committed files are what this
# script wrote; run it from anywhere: scripts/deps.sh test installs both packages.
set -euo pipefail
cd "$(dirname "$0")"
FONT=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
BOLD=/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf

# text lines on a light card, one line per argument after the size and colour
card() {
  local out=$1 size=$2 colour=$3; shift 3
  local args=(-size "$size" "xc:$colour" -fill black -font "$FONT" -pointsize 38)
  local y=80
  for line in "$@"; do
    args+=(-annotate "+50+$y" "$line")
    y=$((y + 64))
  done
  convert "${args[@]}" -strip "$out"
}

card licence-front.png 1200x760 '#eef3fb' \
  "CALIFORNIA" "DRIVER LICENSE" "DL D7654321" "LN SAMPLE" "FN ALEX" \
  "DOB 04/12/1988" "ISS 06/01/2025" "EXP 04/12/2035"
card licence-back.png 1200x760 '#eef3fb' \
  "CLASS C   RSTR NONE" "ISS 06/01/2025" "ORGAN DONOR"
card insurance-certificate.png 1700x1000 white \
  "CERTIFICATE OF LIABILITY INSURANCE" "Carrier: Acme Mutual Insurance" "Policy Number: GL-5550123" \
  "Effective Date: 01/01/2026" "Expiration Date: 01/01/2036" "Coverage Amount: \$2,000,000"

convert -size 320x320 gradient:'#f6d7b0'-'#8a5a3c' -fill '#3c2a20' -draw "circle 160,130 160,60" \
  -draw "ellipse 160,320 120,110 180,360" -strip headshot.png
convert -size 400x200 xc:'#1d6b3a' -fill white -font "$BOLD" -pointsize 44 -gravity center \
  -annotate +0+0 "GREEN ACRES" -strip logo.png
convert -size 640x400 gradient:'#9bd17a'-'#2f6b1f' -strip -quality 80 lawn-before.jpg
convert -size 640x400 gradient:'#b6e39a'-'#3f8a2a' -fill '#5a3d1e' -draw "rectangle 0,360 640,400" \
  -strip -quality 80 lawn-after.jpg
