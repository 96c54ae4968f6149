//! The charts' own words: captions, bar and axis labels and legend names, each one SVG
//! `<text>` written here and added to plotters' drawing, because plotters draws a label as
//! one line and can neither break it nor title it. A label is broken at words into lines
//! (`<tspan>`s) that fit the room it has; one that still does not fit in its lines is
//! shortened with "…" and keeps its whole text in a `<title>` (a browser shows it on
//! hover, a screen reader reads it): nothing is cut silently.
//!
//! Units: the SVG's user units (px at the chart's natural size).

use std::fmt::Write as _;

/// A character's width, as a share of the font size: wider than sans-serif's mean
/// (about 0.5), so a line estimated to fit does.
const CHAR_WIDTH: f64 = 0.6;

/// Lines are this many font sizes apart.
pub(super) const LINE_HEIGHT: f64 = 1.25;

/// How a label sits on its point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Anchor {
    /// Centred on x, its first line's top at y.
    TopMiddle,
    /// Centred on x, its last line's bottom at y.
    BottomMiddle,
    /// Starting at x, its first line's top at y.
    TopStart,
}

/// One label, placed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Label {
    pub x: f64,
    pub y: f64,
    pub anchor: Anchor,
    /// Font size, user units.
    pub size: f64,
    pub lines: Vec<String>,
    /// The whole text, where `lines` shorten it.
    pub title: Option<String>,
}

/// How many characters of a font of `size` fit in `width`.
pub(super) fn chars_in(width: f64, size: f64) -> usize {
    ((width / (size * CHAR_WIDTH)).floor() as usize).max(1)
}

/// The height of `lines` lines of a font of `size`.
pub(super) fn height_of(lines: usize, size: f64) -> f64 {
    lines as f64 * size * LINE_HEIGHT
}

/// A text broken into lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wrapped {
    /// Each line but the last ends in the space it was broken at, or in nothing where a
    /// word was broken: joined, they read as the text.
    pub lines: Vec<String>,
    /// The whole text, where `lines` shorten it (the last ending in "…").
    pub title: Option<String>,
    /// A word longer than a line was broken inside it.
    pub broke_a_word: bool,
}

impl Wrapped {
    /// Every word whole, and nothing left out.
    pub(super) fn whole(&self) -> bool {
        self.title.is_none() && !self.broke_a_word
    }

    /// The longest line's characters.
    pub(super) fn widest(&self) -> usize {
        (self.lines.iter())
            .map(|l| l.trim_end().chars().count())
            .max()
            .unwrap_or(0)
    }
}

/// `text` in lines of at most `max` characters, broken at spaces (a longer word broken
/// where it must), at most `max_lines` of them; the last one ends in "…" where the text
/// goes on, and the whole text is kept to title it.
pub(super) fn wrap(text: &str, max: usize, max_lines: usize) -> Wrapped {
    let max = max.max(2);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut broke_a_word = false;
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let used = line.chars().count();
            let room = if used == 0 {
                max
            } else {
                max.saturating_sub(used + 1)
            };
            if word.len() <= room {
                if used > 0 {
                    line.push(' ');
                }
                line.extend(word.iter());
                break;
            }
            if used > 0 {
                line.push(' ');
                lines.push(std::mem::take(&mut line));
                continue;
            }
            // A word longer than a line: as much as fits, the rest on the next.
            let rest = word.split_off(max);
            lines.push(word.iter().collect());
            broke_a_word = true;
            word = rest;
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    let max_lines = max_lines.max(1);
    if lines.len() <= max_lines {
        return Wrapped {
            lines,
            title: None,
            broke_a_word,
        };
    }
    lines.truncate(max_lines);
    if let Some(last) = lines.last_mut() {
        let kept: String = last.trim_end().chars().take(max - 1).collect();
        *last = format!("{}…", kept.trim_end());
    }
    Wrapped {
        lines,
        title: Some(text.to_owned()),
        broke_a_word,
    }
}

/// Escapes text for SVG content and attributes.
fn esc(s: &str) -> String {
    super::super::html::esc(s)
}

impl Label {
    /// `text` wrapped to `width` at font `size`, in at most `max_lines` lines.
    pub(super) fn fitted(
        text: &str,
        (x, y): (f64, f64),
        anchor: Anchor,
        size: f64,
        width: f64,
        max_lines: usize,
    ) -> Label {
        let w = wrap(text, chars_in(width, size), max_lines);
        Label {
            x,
            y,
            anchor,
            size,
            lines: w.lines,
            title: w.title,
        }
    }

    /// The label as one SVG `<text>`: a `<tspan>` a line (joined, they read as the text),
    /// its `<title>` first where it has one.
    pub(super) fn svg(&self) -> String {
        let line_h = self.size * LINE_HEIGHT;
        let ascent = self.size * 0.8;
        let first = match self.anchor {
            Anchor::TopMiddle | Anchor::TopStart => self.y + ascent,
            Anchor::BottomMiddle => {
                self.y - (self.lines.len() as f64 - 1.0) * line_h - self.size * 0.25
            }
        };
        let anchor = match self.anchor {
            Anchor::TopStart => "start",
            Anchor::TopMiddle | Anchor::BottomMiddle => "middle",
        };
        let mut out = format!(
            "<text x=\"{:.1}\" y=\"{first:.1}\" text-anchor=\"{anchor}\" font-family=\"{}\" \
             font-size=\"{:.1}\" fill=\"#000000\">",
            self.x,
            super::FONT,
            self.size
        );
        if let Some(t) = &self.title {
            let _ = write!(out, "<title>{}</title>", esc(t));
        }
        for (i, l) in self.lines.iter().enumerate() {
            let dy = if i == 0 { 0.0 } else { line_h };
            let _ = write!(
                out,
                "<tspan x=\"{:.1}\" dy=\"{dy:.1}\">{}</tspan>",
                self.x,
                esc(l)
            );
        }
        out.push_str("</text>\n");
        out
    }
}

/// A straight stroke: a tick mark, or a legend's swatch.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Stroke {
    pub from: (f64, f64),
    pub to: (f64, f64),
    /// `#RRGGBB`.
    pub colour: String,
    pub width: f64,
}

impl Stroke {
    fn svg(&self) -> String {
        format!(
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\" \
             stroke-width=\"{:.1}\"/>\n",
            self.from.0, self.from.1, self.to.0, self.to.1, self.colour, self.width
        )
    }
}

/// What a chart adds to plotters' drawing.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Marks {
    pub labels: Vec<Label>,
    pub strokes: Vec<Stroke>,
}

impl Marks {
    /// `svg` with these added as its last elements (drawn over the rest).
    pub(super) fn onto(&self, mut svg: String) -> String {
        let at = svg.rfind("</svg>").unwrap_or(svg.len());
        let text: String = (self.strokes.iter().map(Stroke::svg))
            .chain(self.labels.iter().map(Label::svg))
            .collect();
        svg.insert_str(at, &text);
        svg
    }

    /// Under a chart's x axis: the axis's `title` centred over `(left, right)` at `top`, one
    /// line `width` wide, and the legend of `entries` under it.
    pub(super) fn axis_title_and_legend(
        &mut self,
        title: &str,
        (left, right): (f64, f64),
        top: f64,
        entries: &[(String, Option<String>, bool)],
        width: f64,
        size: f64,
    ) {
        self.labels.push(Label::fitted(
            title,
            (f64::midpoint(left, right), top),
            Anchor::TopMiddle,
            size,
            width,
            1,
        ));
        self.legend(
            entries,
            (super::MARGIN, top + height_of(1, size) + 6.0),
            width,
            size,
        );
    }

    /// A legend of `entries` (a name, its swatch's colour and whether the swatch is a box
    /// or a line; no swatch without a colour) from `(x, y)` in rows `width` wide, entries
    /// side by side where they fit, a name too long for a row broken over lines; returns
    /// the height it took.
    pub(super) fn legend(
        &mut self,
        entries: &[(String, Option<String>, bool)],
        (x, y): (f64, f64),
        width: f64,
        size: f64,
    ) -> f64 {
        const SWATCH: f64 = 18.0;
        const GAP: f64 = 6.0;
        let line_h = size * LINE_HEIGHT;
        let (mut cx, mut cy, mut row_h) = (x, y, 0.0_f64);
        for (name, colour, boxed) in entries {
            let swatch = if colour.is_some() { SWATCH + GAP } else { 0.0 };
            let w = wrap(name, chars_in(width - swatch, size), 3);
            let entry_w = swatch + w.widest() as f64 * size * CHAR_WIDTH;
            if cx > x && cx + entry_w > x + width {
                cx = x;
                cy += row_h;
                row_h = 0.0;
            }
            if let Some(colour) = colour {
                let mid = cy + size * 0.55;
                self.strokes.push(Stroke {
                    from: (cx, mid),
                    to: (cx + SWATCH, mid),
                    colour: colour.clone(),
                    width: if *boxed { size * 0.8 } else { 2.5 },
                });
            }
            let n = w.lines.len();
            self.labels.push(Label {
                x: cx + swatch,
                y: cy,
                anchor: Anchor::TopStart,
                size,
                lines: w.lines,
                title: w.title,
            });
            row_h = row_h.max(height_of(n, size) + 0.4 * line_h);
            cx += entry_w + 2.0 * GAP;
        }
        cy + row_h - y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_breaks_at_words_and_a_long_word_where_it_must() {
        let w = wrap("keep this machine (measured)", 12, 3);
        assert_eq!(w.lines, ["keep this ", "machine ", "(measured)"]);
        assert!(w.whole() && w.widest() == 10);
        let w = wrap("abcdefghij", 4, 3);
        assert_eq!(w.lines, ["abcd", "efgh", "ij"]);
        assert!(w.broke_a_word && !w.whole());
        // Joined, the lines read as the text.
        assert_eq!(w.lines.concat(), "abcdefghij");
        assert_eq!(wrap("", 4, 3).lines, [""]);
    }

    /// Regression: "keep this machine (measu…" was cut with nothing to say what it said.
    #[test]
    fn a_label_that_does_not_fit_its_lines_is_shortened_and_titled() {
        let text = "a rather long configuration name that goes on";
        let w = wrap(text, 10, 2);
        assert_eq!(w.lines.len(), 2);
        let last = &w.lines[1];
        assert!(last.ends_with('…') && last.chars().count() <= 10, "{w:?}");
        assert_eq!(w.title.as_deref(), Some(text));
        let l = Label::fitted(text, (10.0, 10.0), Anchor::TopMiddle, 12.0, 72.0, 2);
        let svg = l.svg();
        assert!(svg.contains(&format!("<title>{text}</title>")), "{svg}");
        assert_eq!(svg.matches("<tspan").count(), 2, "{svg}");
    }

    #[test]
    fn a_label_reads_as_its_text_and_escapes_it() {
        let l = Label::fitted("a <b> & c", (0.0, 0.0), Anchor::TopStart, 12.0, 40.0, 3);
        let svg = l.svg();
        assert!(svg.contains(">a &lt;b&gt; </tspan><tspan"), "{svg}");
        assert!(!svg.contains("<b>"), "{svg}");
        let joined = Marks {
            labels: vec![l],
            strokes: Vec::new(),
        }
        .onto("<svg></svg>".into());
        assert!(joined.ends_with("</text>\n</svg>"), "{joined}");
    }
}
