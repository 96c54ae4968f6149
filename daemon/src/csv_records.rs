//! CSV by the `csv` crate's rules (RFC 4180: double quotes around a field that holds the
//! delimiter, a quote or a line break; `""` inside quotes is a quote). The importers of
//! price series (`tariff import`) and of SPECpower results (`candidate import`) read their
//! files as [`records`], each with the line it starts on, so that a refusal names the
//! line; `report --format csv` writes its rows with one `csv` writer
//! (`report::render::csv`).

/// One record of a CSV file: its fields (each trimmed) and the line it starts on (from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub line: usize,
    pub fields: Vec<String>,
}

/// The records of `text`, read by one `csv` reader with `delim` between fields: a UTF-8
/// byte order mark, blank lines and (where `comments`) lines starting with `#` skipped.
/// `Err((line, why))` where a record cannot be read as one line: a quote opened and never
/// closed (the reader would take the rest of the file as its field), a quoted field over
/// several lines, or bytes that are not text.
pub fn records(text: &str, delim: u8, comments: bool) -> Result<Vec<Record>, (usize, String)> {
    let text = text.trim_start_matches('\u{feff}');
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .delimiter(delim)
        .from_reader(text.as_bytes());
    let mut out = Vec::new();
    let mut record = csv::StringRecord::new();
    // Where the last record ended: the reader's own positions count from before the blank
    // lines it skips, so a record's line is found from here.
    let (mut end, mut end_line) = (0usize, 1usize);
    loop {
        let read = reader.read_record(&mut record);
        let (mut start, mut line) = (end, end_line);
        while let Some(n) = ["\n", "\r\n"]
            .iter()
            .find(|t| text[start..].starts_with(**t))
            .map(|t| t.len())
        {
            start += n;
            line += 1;
        }
        match read {
            Ok(false) => return Ok(out),
            Ok(true) => {}
            Err(e) => return Err((line, e.to_string())),
        }
        let p = reader.position();
        end = usize::try_from(p.byte())
            .unwrap_or(text.len())
            .min(text.len());
        end_line = usize::try_from(p.line()).unwrap_or(usize::MAX);
        let raw = text.get(start..end).unwrap_or_default();
        if !raw.matches('"').count().is_multiple_of(2) {
            return Err((line, "a quote is opened and never closed".to_owned()));
        }
        if raw.trim_end().contains(['\n', '\r']) {
            return Err((line, "a quoted field runs over several lines".to_owned()));
        }
        if record.iter().all(str::is_empty) || (comments && raw.trim_start().starts_with('#')) {
            continue;
        }
        out.push(Record {
            line,
            fields: record.iter().map(str::to_owned).collect(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str, delim: u8) -> Vec<String> {
        records(text, delim, false)
            .unwrap()
            .pop()
            .map(|r| r.fields)
            .unwrap_or_default()
    }

    #[test]
    fn records_honour_quotes_and_escaped_quotes_and_name_their_lines() {
        assert_eq!(fields("a,\"b,c\", d ", b','), ["a", "b,c", "d"]);
        assert_eq!(fields("\"say \"\"hi\"\"\";2", b';'), ["say \"hi\"", "2"]);
        assert_eq!(fields("a,,b", b','), ["a", "", "b"]);
        let text = "\u{feff}h1,h2\n\n  \n# note\nx,y\n";
        let r = records(text, b',', true).unwrap();
        assert_eq!(
            r,
            [
                Record {
                    line: 1,
                    fields: vec!["h1".into(), "h2".into()]
                },
                Record {
                    line: 5,
                    fields: vec!["x".into(), "y".into()]
                }
            ]
        );
        assert_eq!(records("# x,y\n", b',', false).unwrap().len(), 1);
        for text in ["a,b\n\"c,d\ne,f\n", "a,b\n\"c,d\n", "a,b\n\n\"c\nd\",e\n"] {
            let (line, why) = records(text, b',', false).unwrap_err();
            assert_eq!(line, if text.contains("\n\n") { 3 } else { 2 }, "{text:?}");
            assert!(
                why.contains("never closed") || why.contains("several lines"),
                "{why}"
            );
        }
        let r = records("a\r\n\r\n\r\nb\r\n", b',', false).unwrap();
        assert_eq!(r[1].line, 4);
    }
}
