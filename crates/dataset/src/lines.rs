//! Reading a file line by line with a bounded buffer.
//!
//! A line longer than the limit is scanned to its end (to report its length and find the next
//! line) but never held in memory: at most `limit` bytes of one line are buffered.

use std::io::{self, BufRead};

/// One line of input, without its `\n` (a trailing `\r` is left in place).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// The line's bytes are in the caller's buffer.
    Complete,
    /// The line was longer than the limit; the buffer is empty.
    TooLong { bytes: u64 },
}

/// Where a line is, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineStart {
    /// 1-based line number.
    pub number: usize,
    /// Byte offset of the line's first byte from the start of the input.
    pub offset: u64,
}

pub(crate) struct Lines<R> {
    inner: R,
    limit: usize,
    offset: u64,
    number: usize,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(inner: R, limit: usize) -> Lines<R> {
        Lines { inner, limit, offset: 0, number: 0 }
    }

    /// The 1-based number of the line the next read starts (or is in, after an error).
    pub(crate) fn next_number(&self) -> usize {
        self.number + 1
    }

    /// Read the next line into `buf` (cleared first). `Ok(None)` at the end of the input.
    pub(crate) fn next_line(&mut self, buf: &mut Vec<u8>) -> io::Result<Option<(LineStart, Line)>> {
        buf.clear();
        let start = LineStart { number: self.number + 1, offset: self.offset };
        let mut len: u64 = 0;
        let mut too_long = false;
        let mut seen_any = false;
        loop {
            let available = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                if !seen_any {
                    return Ok(None);
                }
                break;
            }
            seen_any = true;
            let newline = available.iter().position(|&b| b == b'\n');
            let chunk = &available[..newline.unwrap_or(available.len())];
            len += chunk.len() as u64;
            if !too_long {
                if buf.len() + chunk.len() > self.limit {
                    too_long = true;
                    buf.clear();
                    buf.shrink_to(self.limit.min(1 << 20));
                } else {
                    buf.extend_from_slice(chunk);
                }
            }
            let used = chunk.len() + usize::from(newline.is_some());
            self.inner.consume(used);
            self.offset += used as u64;
            if newline.is_some() {
                break;
            }
        }
        self.number += 1;
        let line = if too_long { Line::TooLong { bytes: len } } else { Line::Complete };
        Ok(Some((start, line)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], limit: usize) -> Vec<(usize, u64, Result<Vec<u8>, u64>)> {
        let mut lines = Lines::new(io::BufReader::with_capacity(4, input), limit);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        while let Some((start, line)) = lines.next_line(&mut buf).expect("in-memory input cannot fail") {
            let v = match line {
                Line::Complete => Ok(buf.clone()),
                Line::TooLong { bytes } => Err(bytes),
            };
            out.push((start.number, start.offset, v));
        }
        out
    }

    #[test]
    fn splits_lines_across_small_reads_and_keeps_offsets() {
        let got = all(b"abc\n\nlonger line\nlast", 100);
        assert_eq!(
            got,
            vec![
                (1, 0, Ok(b"abc".to_vec())),
                (2, 4, Ok(Vec::new())),
                (3, 5, Ok(b"longer line".to_vec())),
                (4, 17, Ok(b"last".to_vec())),
            ]
        );
    }

    #[test]
    fn a_trailing_newline_does_not_make_an_extra_line() {
        assert_eq!(all(b"a\nb\n", 10).len(), 2);
        assert!(all(b"", 10).is_empty());
    }

    #[test]
    fn over_long_lines_report_their_length_and_reading_goes_on() {
        let got = all(b"12345\n1234567890\n123\n", 5);
        assert_eq!(got, vec![(1, 0, Ok(b"12345".to_vec())), (2, 6, Err(10)), (3, 17, Ok(b"123".to_vec()))]);
    }
}
