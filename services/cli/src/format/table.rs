//! Column tables (`ID  Type  Priority …`) and `Key = Value` blocks.

/// Lays out rows as left-aligned columns separated by two spaces; the first
/// row is the header. Empty cells read `<none>`; trailing spaces are trimmed.
pub fn table<R, C>(rows: R) -> String
where
    R: IntoIterator<Item = C>,
    C: IntoIterator,
    C::Item: Into<String>,
{
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| r.into_iter().map(|c| none_if_empty(c.into())).collect())
        .collect();
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; columns];
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if out.ends_with('\n') {
        out.pop();
    }
    out
}

fn none_if_empty(s: String) -> String {
    if s.is_empty() {
        "<none>".to_string()
    } else {
        s
    }
}

/// Lays out `key = value` pairs with the `=` signs aligned; empty values
/// read `<none>`.
pub fn kv<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> String {
    let width = pairs
        .iter()
        .map(|(k, _)| k.as_ref().chars().count())
        .max()
        .unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| {
            let k = k.as_ref();
            let pad = width - k.chars().count();
            let v = v.as_ref();
            let v = if v.is_empty() { "<none>" } else { v };
            format!("{k}{} = {v}", " ".repeat(pad))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_the_widest_cell() {
        let out = table([
            vec!["ID", "Type", "Priority", "Status", "Submit Date"],
            vec!["hello", "service", "50", "running", "2024-01-02T03:04:05Z"],
            vec!["a-much-longer-id", "batch", "40", "dead", ""],
        ]);
        assert_eq!(
            out,
            "ID                Type     Priority  Status   Submit Date\n\
             hello             service  50        running  2024-01-02T03:04:05Z\n\
             a-much-longer-id  batch    40        dead     <none>"
        );
    }

    #[test]
    fn an_empty_table_is_empty() {
        assert_eq!(table(Vec::<Vec<String>>::new()), "");
    }

    #[test]
    fn key_values_align_on_the_equals_sign() {
        let out = kv(&[("ID", "hello"), ("Submit Date", "now"), ("Type", "")]);
        assert_eq!(
            out,
            "ID          = hello\nSubmit Date = now\nType        = <none>"
        );
    }
}
