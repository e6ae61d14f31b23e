//! A CSV file read by column name: the verdict reads whatever columns a run wrote and
//! tolerates the ones it lacks.

use super::VerdictError;

/// A CSV file: its header and its rows as text.
#[derive(Debug, Clone, Default)]
pub(super) struct Table {
    file: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// The file line of each row, for errors.
    lines: Vec<u64>,
}

impl Table {
    /// Parse a CSV text with a header; `file` names it in errors.
    pub(super) fn parse(text: &str, file: &str) -> Result<Table, VerdictError> {
        let mut reader = ::csv::ReaderBuilder::new().has_headers(true).from_reader(text.as_bytes());
        let csv_err = |e: ::csv::Error| VerdictError::Csv {
            file: file.to_string(),
            line: e.position().map(|p| p.line()).unwrap_or(1),
            problem: e.to_string(),
        };
        let header = reader.headers().map_err(csv_err)?.iter().map(|h| h.trim().to_string()).collect();
        let mut table = Table { file: file.to_string(), header, rows: Vec::new(), lines: Vec::new() };
        for record in reader.records() {
            let record = record.map_err(csv_err)?;
            table.lines.push(record.position().map(|p| p.line()).unwrap_or(0));
            table.rows.push(record.iter().map(str::to_string).collect());
        }
        Ok(table)
    }

    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The index of a column, if the file has it.
    pub(super) fn col(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// The index of a column the verdict cannot do without.
    pub(super) fn require(&self, name: &str) -> Result<usize, VerdictError> {
        self.col(name).ok_or_else(|| VerdictError::MissingColumn { file: self.file.clone(), column: name.into() })
    }

    /// A cell's text (empty when the row is short).
    pub(super) fn text(&self, row: usize, col: usize) -> &str {
        self.rows[row].get(col).map(String::as_str).unwrap_or("")
    }

    /// A cell as a number: empty is `None`; `true`/`false` are 1 and 0; anything else that is
    /// not a finite number is an error naming file, line and column.
    pub(super) fn num(&self, row: usize, col: usize) -> Result<Option<f64>, VerdictError> {
        let cell = self.text(row, col).trim();
        let value = match cell {
            "" => return Ok(None),
            "true" => 1.0,
            "false" => 0.0,
            _ => cell.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| VerdictError::Number {
                file: self.file.clone(),
                line: self.lines[row],
                column: self.header[col].clone(),
                value: cell.to_string(),
            })?,
        };
        Ok(Some(value))
    }
}
