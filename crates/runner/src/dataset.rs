//! Datasets: JSONL files of conversations. Loading, validation, errors that name file, line
//! and field.
