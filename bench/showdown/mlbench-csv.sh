#!/bin/sh
# Converts the two classification problems of the showdown from Debian's
# r-cran-mlbench (apt-get install -y r-cran-mlbench) into CSV files under
# DIR (default data): satellite.csv, Statlog (Landsat) Satellite (6,435
# rows, 36 features, 6 classes), and letter.csv, Letter Recognition
# (20,000 rows, 16 features, 26 classes). Each has a header, the features
# first and the class label last, the layout `refinery simulate --env
# csv:PATH` reads (it standardizes the features). The CSV files are data,
# not source: they are never committed (data/ is ignored).
set -eu
dir=${1:-data}
command -v Rscript >/dev/null || { echo "mlbench-csv.sh: Rscript not found: apt-get install -y r-cran-mlbench" >&2; exit 1; }
mkdir -p "$dir"
Rscript --vanilla -e "
suppressMessages(library(mlbench))
data(Satellite)
s <- Satellite[, c(setdiff(names(Satellite), 'classes'), 'classes')]
write.csv(s, '$dir/satellite.csv', row.names = FALSE)
data(LetterRecognition)
l <- LetterRecognition[, c(setdiff(names(LetterRecognition), 'lettr'), 'lettr')]
write.csv(l, '$dir/letter.csv', row.names = FALSE)
cat(sprintf('wrote $dir/satellite.csv (%d rows) and $dir/letter.csv (%d rows)\n', nrow(s), nrow(l)))
"
