//! One line of a CSV file, split into its fields: what the importers of price series
//! (`tariff import`) and of SPECpower results (`candidate import`) share. Each reads its file
//! line by line, so that a refusal names the line.

/// Splits one CSV line on `delim`, honouring double quotes (`""` inside quotes is a quote);
/// each field is trimmed.
pub fn fields(line: &str, delim: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            c if c == delim && !quoted => out.push(std::mem::take(&mut cur).trim().to_owned()),
            c => cur.push(c),
        }
    }
    out.push(cur.trim().to_owned());
    out
}

/// Whether every quote the line opens is closed (an even number of `"`: an escaped quote is
/// two).
pub fn quotes_closed(line: &str) -> bool {
    line.matches('"').count().is_multiple_of(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_honour_quotes_and_escaped_quotes() {
        assert_eq!(fields("a, \"b,c\" ,d", ','), ["a", "b,c", "d"]);
        assert_eq!(fields("\"say \"\"hi\"\"\";2", ';'), ["say \"hi\"", "2"]);
        assert_eq!(fields("", ','), [""]);
        assert!(quotes_closed("\"a\"\"b\",c"));
        assert!(!quotes_closed("\"a,b"));
    }
}
