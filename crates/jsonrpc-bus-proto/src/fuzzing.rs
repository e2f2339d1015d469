//! Fuzz entry points (filled in by the fuzz targets work).
