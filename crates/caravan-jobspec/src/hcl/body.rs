//! A reader over one HCL block body that tracks which arguments and blocks were consumed,
//! so that anything left over is reported: as a warning when Nomad knows it and Caravan
//! does not support it yet, as an error naming its path otherwise.

use super::value::{self, Val};
use crate::error::{FieldError, join_path as join};
use hcl_edit::Span;
use hcl_edit::structure::{Attribute, Block, Body as HclBody, Structure};
use std::ops::Range;

/// The file being decoded, with line starts for error positions.
pub(crate) struct Source<'a> {
    pub text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> Source<'a> {
    pub fn new(text: &'a str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Source { text, line_starts }
    }

    /// 1-based line of a byte offset.
    pub fn line(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&start| start <= offset)
    }

    fn at(&self, span: Option<Range<usize>>) -> String {
        span.map(|r| format!(" (line {})", self.line(r.start)))
            .unwrap_or_default()
    }
}

/// Errors and warnings of one decode.
#[derive(Debug, Default)]
pub(crate) struct Diag {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
}

/// One block body being decoded.
pub(crate) struct Body<'a, 's> {
    src: &'s Source<'a>,
    path: String,
    attrs: Vec<(&'a Attribute, bool)>,
    blocks: Vec<(&'a Block, bool)>,
}

impl<'a, 's> Body<'a, 's> {
    /// Reads a body; `path` names it Nomad-style (`job "web": group "cache"`).
    pub fn new(body: &'a HclBody, src: &'s Source<'a>, path: String) -> Self {
        // The parser already rejects an argument set twice, so every key here is unique.
        let mut attrs = Vec::new();
        let mut blocks = Vec::new();
        for structure in body.iter() {
            match structure {
                Structure::Attribute(a) => attrs.push((a, false)),
                Structure::Block(b) => blocks.push((b, false)),
            }
        }
        Body {
            src,
            path,
            attrs,
            blocks,
        }
    }

    /// The Nomad-style path of this body.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The path of a field of this body.
    pub fn field_path(&self, name: &str) -> String {
        join(&self.path, name)
    }

    /// Evaluates an argument and converts it, reporting failures against its path.
    pub fn get<T>(
        &mut self,
        name: &str,
        diag: &mut Diag,
        convert: impl FnOnce(&Val) -> Result<T, String>,
    ) -> Option<T> {
        let (attr, used) = self
            .attrs
            .iter_mut()
            .find(|(a, _)| a.key.as_str() == name)?;
        *used = true;
        let attr: &'a Attribute = attr;
        let result = value::eval(&attr.value, self.src.text).and_then(|v| convert(&v));
        match result {
            Ok(v) => Some(v),
            Err(message) => {
                diag.errors.push(FieldError::new(
                    join(&self.path, name),
                    format!("{message}{}", self.src.at(attr.value.span())),
                ));
                None
            }
        }
    }

    /// A string argument.
    pub fn string(&mut self, name: &str, diag: &mut Diag) -> Option<String> {
        self.get(name, diag, value::to_string)
    }

    /// A whole-number argument.
    pub fn int(&mut self, name: &str, diag: &mut Diag) -> Option<i64> {
        self.get(name, diag, value::to_i64)
    }

    /// A bool argument.
    pub fn bool(&mut self, name: &str, diag: &mut Diag) -> Option<bool> {
        self.get(name, diag, value::to_bool)
    }

    /// A duration argument (`"30s"`), in nanoseconds.
    pub fn duration(&mut self, name: &str, diag: &mut Diag) -> Option<i64> {
        self.get(name, diag, value::to_duration)
    }

    /// A list-of-strings argument.
    pub fn string_list(&mut self, name: &str, diag: &mut Diag) -> Option<Vec<String>> {
        self.get(name, diag, value::to_string_list)
    }

    /// A raw literal argument.
    pub fn value(&mut self, name: &str, diag: &mut Diag) -> Option<Val> {
        self.get(name, diag, |v| Ok(v.clone()))
    }

    /// A string map written either as `name { k = "v" }` or as `name = { k = "v" }`.
    pub fn string_map(&mut self, name: &str, diag: &mut Diag) -> Option<Vec<(String, String)>> {
        let from_attr = self.get(name, diag, value::to_string_map);
        let blocks = self.blocks(name);
        if blocks.is_empty() {
            return from_attr;
        }
        let mut out = from_attr.unwrap_or_default();
        for block in blocks {
            if !block.labels.is_empty() {
                self.error_at(name, "block takes no labels", block.span(), diag);
                continue;
            }
            let mut body = Body::new(&block.body, self.src, self.field_path(name));
            let keys: Vec<String> = body
                .attrs
                .iter()
                .map(|(a, _)| a.key.as_str().to_string())
                .collect();
            for key in keys {
                if let Some(v) = body.string(&key, diag) {
                    out.retain(|(k, _)| *k != key);
                    out.push((key, v));
                }
            }
            body.finish(&[], &[], diag);
        }
        Some(out)
    }

    /// Every block with this identifier, consumed.
    pub fn blocks(&mut self, ident: &str) -> Vec<&'a Block> {
        self.blocks
            .iter_mut()
            .filter(|(b, _)| b.ident.as_str() == ident)
            .map(|(b, used)| {
                *used = true;
                *b
            })
            .collect()
    }

    /// At most one unlabeled block with this identifier; more is an error.
    pub fn single_block(&mut self, ident: &str, diag: &mut Diag) -> Option<&'a Block> {
        let blocks = self.blocks(ident);
        if let Some(extra) = blocks.get(1) {
            self.error_at(
                ident,
                "only one block of this type is allowed here",
                extra.span(),
                diag,
            );
        }
        let block = *blocks.first()?;
        if !block.labels.is_empty() {
            self.error_at(ident, "block takes no labels", block.span(), diag);
        }
        Some(block)
    }

    /// The single label of a labeled block (`group "web"`), or an error.
    pub fn label(&self, block: &Block, diag: &mut Diag) -> Option<String> {
        let ident = block.ident.as_str();
        match block.labels.as_slice() {
            [label] => Some(label.as_str().to_string()),
            labels => {
                self.error_at(
                    ident,
                    &format!("block needs exactly one label, found {}", labels.len()),
                    block.span(),
                    diag,
                );
                None
            }
        }
    }

    /// A child body, with its path.
    pub fn child(&self, block: &'a Block, path: String) -> Body<'a, 's> {
        Body::new(&block.body, self.src, path)
    }

    /// The source, for nested decoders that evaluate raw expressions.
    pub fn source(&self) -> &'s Source<'a> {
        self.src
    }

    /// Every argument and block left, unconsumed.
    pub fn remaining(&mut self) -> (Vec<&'a Attribute>, Vec<&'a Block>) {
        let attrs = self.attrs.iter_mut().filter(|(_, u)| !*u).map(|(a, u)| {
            *u = true;
            *a
        });
        let attrs = attrs.collect();
        let blocks = self.blocks.iter_mut().filter(|(_, u)| !*u).map(|(b, u)| {
            *u = true;
            *b
        });
        (attrs, blocks.collect())
    }

    /// Reports an error on a field of this body at a source position.
    pub fn error_at(
        &self,
        field: &str,
        message: &str,
        span: Option<Range<usize>>,
        diag: &mut Diag,
    ) {
        diag.errors.push(FieldError::new(
            join(&self.path, field),
            format!("{message}{}", self.src.at(span)),
        ));
    }

    /// Reports what was not consumed: `unsupported_*` are Nomad features Caravan lacks
    /// (a warning each); anything else is unknown (an error each).
    pub fn finish(
        mut self,
        unsupported_attrs: &[&str],
        unsupported_blocks: &[&str],
        diag: &mut Diag,
    ) {
        let (attrs, blocks) = self.remaining();
        for attr in attrs {
            let name = attr.key.as_str();
            if unsupported_attrs.contains(&name) {
                diag.warnings.push(format!(
                    "{}: argument {name:?} is not supported by Caravan yet and was ignored",
                    self.path
                ));
            } else {
                self.error_at(
                    name,
                    "unsupported argument: no argument of this name is expected here",
                    attr.span(),
                    diag,
                );
            }
        }
        let mut warned: Vec<&str> = Vec::new();
        for block in blocks {
            let ident = block.ident.as_str();
            if unsupported_blocks.contains(&ident) {
                if !warned.contains(&ident) {
                    warned.push(ident);
                    diag.warnings.push(format!(
                        "{}: {ident} block is not supported by Caravan yet and was ignored",
                        self.path
                    ));
                }
            } else {
                self.error_at(
                    ident,
                    "unsupported block type: no block of this type is expected here",
                    block.span(),
                    diag,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based() {
        let src = Source::new("a\nbb\nccc");
        assert_eq!(src.line(0), 1);
        assert_eq!(src.line(2), 2);
        assert_eq!(src.line(5), 3);
    }
}
