//! One line of a CSV file, read or written by the `csv` crate's rules (RFC 4180: double
//! quotes around a field that holds the delimiter, a quote or a line break; `""` inside
//! quotes is a quote). The importers of price series (`tariff import`) and of SPECpower
//! results (`candidate import`) read their files line by line, so that a refusal names the
//! line; `report --format csv` writes its fields through [`field`].

/// Splits one CSV line on `delim`; each field is trimmed. An empty line is one empty field.
/// A quote opens a quoted field only as its first character (RFC 4180).
pub fn fields(line: &str, delim: char) -> Vec<String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .delimiter(u8::try_from(delim).unwrap_or(b','))
        .from_reader(line.as_bytes());
    let mut record = csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => record.iter().map(str::to_owned).collect(),
        // Nothing to read (an empty line), or bytes that are not UTF-8 (the callers read
        // text, so this cannot happen): one empty field, as a line without a delimiter.
        Ok(false) | Err(_) => vec![String::new()],
    }
}

/// Whether every quote the line opens is closed (an even number of `"`: an escaped quote is
/// two). The `csv` crate reads an unclosed quote to the end of its input; a line-by-line
/// importer refuses the line instead.
pub fn quotes_closed(line: &str) -> bool {
    line.matches('"').count().is_multiple_of(2)
}

/// `s` as one field of a `,`-separated line: quoted where it holds a comma, a quote or a
/// line break.
pub fn field(s: &str) -> String {
    // A record of one empty field is written `""` (to tell it from no record); in a row it
    // is nothing between two commas.
    if s.is_empty() {
        return String::new();
    }
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    if writer.write_record([s]).is_err() {
        return s.to_owned();
    }
    writer
        .into_inner()
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .map_or_else(
            || s.to_owned(),
            |mut line| {
                line.pop(); // the record's terminator
                line
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_honour_quotes_and_escaped_quotes() {
        assert_eq!(fields("a,\"b,c\", d ", ','), ["a", "b,c", "d"]);
        assert_eq!(fields("\"say \"\"hi\"\"\";2", ';'), ["say \"hi\"", "2"]);
        assert_eq!(fields("", ','), [""]);
        assert_eq!(fields("a,,b", ','), ["a", "", "b"]);
        assert!(quotes_closed("\"a\"\"b\",c"));
        assert!(!quotes_closed("\"a,b"));
    }

    #[test]
    fn fields_are_quoted_only_where_they_must_be() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field(""), "");
        // Written and read back, as a spreadsheet would.
        for s in ["a,b", "say \"hi\"", "x"] {
            assert_eq!(fields(&field(s), ','), [s]);
        }
    }
}
