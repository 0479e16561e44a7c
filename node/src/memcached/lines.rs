//! Reading the stream line by line with a bound on the line, and skipping data blocks.

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::LINE_BYTES_MAX;

/// What reading one line found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LineRead {
    /// A whole line is in the buffer, its line end (`\n` or `\r\n`) removed.
    Line,
    /// The stream ended cleanly, between lines.
    Eof,
    /// The stream ended in the middle of a line.
    Truncated,
    /// No line end within `LINE_BYTES_MAX` bytes (plus the line end itself).
    TooLong,
}

/// Reads one line into `line`, holding at most `LINE_BYTES_MAX + 1` bytes of it.
pub(super) async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R, line: &mut Vec<u8>) -> io::Result<LineRead> {
    line.clear();
    // A line's content, an optional '\r' and its '\n': the most that can be scanned for one line.
    let scan_max = LINE_BYTES_MAX + 2;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.is_empty() { LineRead::Eof } else { LineRead::Truncated });
        }
        let window = &available[..available.len().min(scan_max - line.len())];
        if let Some(end) = window.iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&window[..end]);
            reader.consume(end + 1);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(if line.len() > LINE_BYTES_MAX { LineRead::TooLong } else { LineRead::Line });
        }
        if line.len() + window.len() >= scan_max {
            return Ok(LineRead::TooLong);
        }
        let taken = window.len();
        line.extend_from_slice(window);
        reader.consume(taken);
    }
}

/// Skips `bytes` bytes. False if the stream ended first.
pub(super) async fn skip_bytes<R: AsyncBufRead + Unpin>(reader: &mut R, mut bytes: usize) -> io::Result<bool> {
    while bytes > 0 {
        let available = reader.fill_buf().await?.len();
        if available == 0 {
            return Ok(false);
        }
        let taken = available.min(bytes);
        reader.consume(taken);
        bytes -= taken;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, BufReader};

    use super::*;

    async fn lines_of(input: &[u8], capacity: usize) -> Vec<(LineRead, Vec<u8>)> {
        let mut reader = BufReader::with_capacity(capacity, input);
        let mut line = Vec::new();
        let mut out = Vec::new();
        loop {
            let read = read_line(&mut reader, &mut line).await.expect("reading a slice cannot fail");
            out.push((read, line.clone()));
            if read != LineRead::Line {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn reads_lines_at_any_buffer_size() {
        for capacity in [1, 2, 3, 7, 8192] {
            let lines = lines_of(b"get a\r\nversion\n\r\nx\r", capacity).await;
            let expected: Vec<(LineRead, Vec<u8>)> = vec![
                (LineRead::Line, b"get a".to_vec()),
                (LineRead::Line, b"version".to_vec()),
                (LineRead::Line, b"".to_vec()),
                (LineRead::Truncated, b"x\r".to_vec()),
            ];
            assert_eq!(lines, expected, "capacity {capacity}");
            assert_eq!(lines_of(b"", capacity).await, vec![(LineRead::Eof, vec![])]);
        }
    }

    #[tokio::test]
    async fn line_limit_is_exact() {
        for capacity in [1000, 8192, 1 << 20] {
            let mut exact = vec![b'a'; LINE_BYTES_MAX];
            exact.extend_from_slice(b"\r\n");
            assert_eq!(lines_of(&exact, capacity).await[0], (LineRead::Line, vec![b'a'; LINE_BYTES_MAX]));
            let mut bare = vec![b'a'; LINE_BYTES_MAX];
            bare.push(b'\n');
            assert_eq!(lines_of(&bare, capacity).await[0].0, LineRead::Line);
            let mut over = vec![b'a'; LINE_BYTES_MAX + 1];
            over.push(b'\n');
            assert_eq!(lines_of(&over, capacity).await[0].0, LineRead::TooLong);
            let endless = vec![b'a'; 3 * LINE_BYTES_MAX];
            let (read, held) = &lines_of(&endless, capacity).await[0];
            assert_eq!(*read, LineRead::TooLong);
            assert!(held.len() <= LINE_BYTES_MAX + 1);
        }
    }

    #[tokio::test]
    async fn skips_data_across_reads() {
        let mut reader = BufReader::with_capacity(3, &b"0123456789rest"[..]);
        assert!(skip_bytes(&mut reader, 10).await.expect("slice"));
        let mut rest = String::new();
        reader.read_to_string(&mut rest).await.expect("slice");
        assert_eq!(rest, "rest");
        let mut short = BufReader::new(&b"0123"[..]);
        assert!(!skip_bytes(&mut short, 10).await.expect("slice"));
    }
}
