//! An error and its causes on one line, each cause said once: kube's and hyper's errors repeat their source in their own text.

use std::error::Error;

/// `err: cause: cause's cause`, leaving out each cause whose text the line
/// already holds. A kube connection error alone would otherwise say "client
/// error (Connect)" three times before it reaches "Connection refused".
pub fn one_line(err: &(dyn Error + 'static)) -> String {
    let mut line = err.to_string();
    let mut cause = err.source();
    while let Some(source) = cause {
        let text = source.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = source.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Link {
        text: &'static str,
        #[source]
        source: Option<Box<Link>>,
    }

    fn chain(texts: &[&'static str]) -> Link {
        texts.iter().rev().fold(None, |source, &text| Some(Link { text, source: source.map(Box::new) })).unwrap()
    }

    #[test]
    fn one_line_should_say_each_cause_once_and_keep_new_ones() {
        let err = chain(&[
            "discovering v1 ConfigMap: ServiceError: client error (Connect)",
            "ServiceError: client error (Connect)",
            "client error (Connect)",
            "tcp connect error: Connection refused (os error 111)",
            "Connection refused (os error 111)",
        ]);
        assert_eq!(
            one_line(&err),
            "discovering v1 ConfigMap: ServiceError: client error (Connect): tcp connect error: Connection refused (os error 111)"
        );
        assert_eq!(one_line(&chain(&["reading config.yaml", "no such file"])), "reading config.yaml: no such file");
    }
}
