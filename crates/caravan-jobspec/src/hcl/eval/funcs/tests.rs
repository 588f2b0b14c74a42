//! Nomad's functions against the results HCL's standard library documents for them.

use std::collections::BTreeMap;

use super::super::{Env, FileAccess, Value, evaluate};
use super::{REFUSED, SUPPORTED};

fn run(expr: &str, files: FileAccess) -> Result<Value, String> {
    let src = format!("a = {expr}");
    let body = hcl_edit::parser::parse_body(&src).map_err(|e| format!("parse: {e}"))?;
    let Some(hcl_edit::structure::Structure::Attribute(a)) = body.iter().next() else {
        panic!("no attribute")
    };
    let env = Env {
        vars: Some(BTreeMap::new()),
        locals: None,
        files: Some(files),
        passthrough: false,
    };
    evaluate(&a.value, &src, &env, &None).map_err(|e| e.message)
}

fn ev(expr: &str) -> Result<Value, String> {
    run(expr, FileAccess::default())
}

/// Each call and the HCL value it gives.
const CASES: &[(&str, &str)] = &[
    // Strings.
    ("upper(\"héllo\")", "\"HÉLLO\""),
    ("lower(\"ABC\")", "\"abc\""),
    (
        "title(\"hello world-wide_web\")",
        "\"Hello World-Wide_web\"",
    ),
    ("chomp(\"hello\\r\\n\\n\")", "\"hello\""),
    ("indent(2, \"a\\nb\")", "\"a\\n  b\""),
    ("trim(\"?!hello?!\", \"!?\")", "\"hello\""),
    ("trimprefix(\"helloworld\", \"hello\")", "\"world\""),
    ("trimsuffix(\"helloworld\", \"world\")", "\"hello\""),
    ("trimspace(\"  hi \\n\")", "\"hi\""),
    ("split(\",\", \"a,b,c\")", "[\"a\", \"b\", \"c\"]"),
    ("join(\"-\", [\"a\", \"b\"], [\"c\"])", "\"a-b-c\""),
    ("strlen(\"héllo\")", "5"),
    ("strrev(\"abc\")", "\"cba\""),
    ("substr(\"hello world\", 1, 4)", "\"ello\""),
    ("substr(\"hello world\", -5, -1)", "\"world\""),
    ("substr(\"hello\", 10, 2)", "\"\""),
    ("replace(\"1 + 2 + 3\", \"+\", \"-\")", "\"1 - 2 - 3\""),
    (
        "regex_replace(\"hello world\", \"(o)\", \"[$1]\")",
        "\"hell[o] w[o]rld\"",
    ),
    (
        "format(\"Hello, %s! %d %05.2f %t %q\", \"Ander\", 3, 3.14159, true, \"x\")",
        "\"Hello, Ander! 3 03.14 true \\\"x\\\"\"",
    ),
    (
        "format(\"%-5s|%5s|%x|%X|%o|%b\", \"a\", \"b\", 255, 255, 8, 5)",
        "\"a    |    b|ff|FF|10|101\"",
    ),
    (
        "format(\"%v %#v %%\", [1], {a = 1})",
        "\"[1] {\\\"a\\\":1} %\"",
    ),
    ("format(\"%[2]s %[1]s\", \"a\", \"b\")", "\"b a\""),
    ("format(\"%e\", 1234.5678)", "\"1.234568e+03\""),
    (
        "formatlist(\"%s=%s\", [\"a\", \"b\"], \"x\")",
        "[\"a=x\", \"b=x\"]",
    ),
    // Collections.
    ("length([1, 2])", "2"),
    ("length({a = 1})", "1"),
    ("length(\"héllo\")", "5"),
    ("keys({b = 1, a = 2})", "[\"a\", \"b\"]"),
    ("values({b = 1, a = 2})", "[2, 1]"),
    ("lookup({a = 1}, \"a\", 0)", "1"),
    ("lookup({a = 1}, \"b\", 0)", "0"),
    ("merge({a = 1, b = 2}, {b = 3}, null)", "{a = 1, b = 3}"),
    ("concat([1], [2, 3])", "[1, 2, 3]"),
    ("contains([\"a\", \"b\"], \"b\")", "true"),
    ("distinct([\"a\", \"b\", \"a\"])", "[\"a\", \"b\"]"),
    ("element([\"a\", \"b\", \"c\"], 4)", "\"b\""),
    ("index([\"a\", \"b\"], \"b\")", "1"),
    ("flatten([[1, [2]], [], [3]])", "[1, 2, 3]"),
    ("chunklist([1, 2, 3], 2)", "[[1, 2], [3]]"),
    ("coalesce(null, \"b\")", "\"b\""),
    ("coalescelist([], [1])", "[1]"),
    ("compact([\"a\", \"\", null, \"b\"])", "[\"a\", \"b\"]"),
    ("reverse([1, 2, 3])", "[3, 2, 1]"),
    (
        "slice([\"a\", \"b\", \"c\", \"d\"], 1, 3)",
        "[\"b\", \"c\"]",
    ),
    ("sort([\"c\", \"a\", \"b\"])", "[\"a\", \"b\", \"c\"]"),
    ("range(3)", "[0, 1, 2]"),
    ("range(1, 4)", "[1, 2, 3]"),
    ("range(10, 0, -3)", "[10, 7, 4, 1]"),
    (
        "setunion([\"b\", \"a\"], [\"c\", \"a\"])",
        "[\"a\", \"b\", \"c\"]",
    ),
    ("setintersection([\"a\", \"b\"], [\"b\", \"c\"])", "[\"b\"]"),
    (
        "setproduct([\"a\", \"b\"], [1, 2])",
        "[[\"a\", 1], [\"a\", 2], [\"b\", 1], [\"b\", 2]]",
    ),
    ("zipmap([\"a\", \"b\"], [1, 2])", "{a = 1, b = 2}"),
    ("max(12, 54, 3)", "54"),
    ("min(12, 54, 3)", "3"),
    // Numbers.
    ("abs(-12.4)", "12.4"),
    ("abs(-3)", "3"),
    ("ceil(4.1)", "5"),
    ("floor(4.9)", "4"),
    ("log(16, 2)", "4"),
    ("pow(3, 2)", "9"),
    ("signum(-13)", "-1"),
    ("parseint(\"FF\", 16)", "255"),
    ("parseint(\"-10\", 2)", "-2"),
    // Encodings.
    ("base64encode(\"Hello World\")", "\"SGVsbG8gV29ybGQ=\""),
    ("base64decode(\"SGVsbG8gV29ybGQ=\")", "\"Hello World\""),
    (
        "jsonencode({b = [1, true, null], a = \"<x>\"})",
        "\"{\\\"a\\\":\\\"\\\\u003cx\\\\u003e\\\",\\\"b\\\":[1,true,null]}\"",
    ),
    ("jsondecode(\"{\\\"a\\\": [1, 2.5]}\")", "{a = [1, 2.5]}"),
    ("urlencode(\"a b&c/d\")", "\"a+b%26c%2Fd\""),
    (
        "csvdecode(\"a,b\\n1,\\\"x,y\\\"\\n\")",
        "[{a = \"1\", b = \"x,y\"}]",
    ),
    (
        "yamldecode(\"a: 1\\nb: [x, true]\\n\")",
        "{a = 1, b = [\"x\", true]}",
    ),
    (
        "yamlencode({a = \"b\", c = [1, 2]})",
        "\"\\\"a\\\": \\\"b\\\"\\n\\\"c\\\":\\n- 1\\n- 2\\n\"",
    ),
    // Hashes and identifiers.
    (
        "md5(\"hello world\")",
        "\"5eb63bbbe01eeed093cb22bb8f5acdc3\"",
    ),
    (
        "sha1(\"hello world\")",
        "\"2aae6c35c94fcfb415dbe95f408b9ce91ee846ed\"",
    ),
    (
        "sha256(\"hello world\")",
        "\"b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9\"",
    ),
    ("length(sha512(\"x\"))", "128"),
    (
        "uuidv5(\"dns\", \"www.terraform.io\")",
        "\"a5008fae-b28c-5ba5-96cd-82b4c53552d6\"",
    ),
    ("length(uuidv4())", "36"),
    ("substr(bcrypt(\"x\", 4), 0, 7)", "\"$2a$04$\""),
    // Networks.
    ("cidrhost(\"10.12.112.0/20\", 16)", "\"10.12.112.16\""),
    ("cidrhost(\"10.12.112.0/20\", -2)", "\"10.12.127.254\""),
    (
        "cidrhost(\"fd00:fd12:3456:7890::/56\", 16)",
        "\"fd00:fd12:3456:7800::10\"",
    ),
    ("cidrnetmask(\"172.16.0.0/12\")", "\"255.240.0.0\""),
    ("cidrhost(\"::1/128\", 0)", "\"::1\""),
    ("cidrsubnet(\"::/0\", 0, 0)", "\"::/0\""),
    ("substr(\"abc\", 1, 9223372036854775807)", "\"bc\""),
    ("cidrsubnet(\"172.16.0.0/12\", 4, 2)", "\"172.18.0.0/16\""),
    (
        "cidrsubnet(\"fd00:fd12:3456:7890::/56\", 16, 162)",
        "\"fd00:fd12:3456:7800:a200::/72\"",
    ),
    (
        "cidrsubnets(\"10.1.0.0/16\", 4, 4, 8, 4)",
        "[\"10.1.0.0/20\", \"10.1.16.0/20\", \"10.1.32.0/24\", \"10.1.48.0/20\"]",
    ),
    // Dates.
    (
        "timeadd(\"2017-11-22T00:00:00Z\", \"10m\")",
        "\"2017-11-22T00:10:00Z\"",
    ),
    (
        "timeadd(\"2017-11-22T00:00:00+01:00\", \"-1h30m\")",
        "\"2017-11-21T22:30:00+01:00\"",
    ),
    (
        "formatdate(\"DD MMM YYYY hh:mm ZZZ\", \"2018-01-02T23:12:01Z\")",
        "\"02 Jan 2018 23:12 UTC\"",
    ),
    (
        "formatdate(\"EEEE, DD-MMM-YY hh:mm:ss ZZZ\", \"2018-01-02T23:12:01-08:00\")",
        "\"Tuesday, 02-Jan-18 23:12:01 -0800\"",
    ),
    (
        "formatdate(\"H:mm AA 'o''clock'\", \"2018-01-02T15:04:05Z\")",
        "\"3:04 PM o'clock\"",
    ),
];

#[test]
fn each_function_gives_what_hcl_documents() {
    let mut failures = Vec::new();
    for (expr, want) in CASES {
        let want = ev(want).unwrap_or_else(|e| panic!("{want}: {e}"));
        match ev(expr) {
            Ok(got) if got == want => {}
            other => failures.push(format!("{expr}: got {other:?}, want {want:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_supported_name_is_callable_and_every_refused_one_says_why() {
    for name in SUPPORTED {
        let err = ev(&format!("{name}()")).err().unwrap_or_default();
        assert!(!err.contains("no function named"), "{name}: {err}");
    }
    for (name, why) in REFUSED {
        let err = ev(&format!("{name}(\"a\", \"b\")")).unwrap_err();
        assert!(err.contains(why), "{name}: {err}");
    }
}

#[test]
fn errors_name_the_function() {
    for (expr, want) in [
        (
            "element([], 0)",
            "Call to function \"element\" failed: cannot use element function with an empty list",
        ),
        ("lookup({}, \"k\")", "lookup failed to find key \"k\""),
        (
            "upper(\"a\", \"b\")",
            "function \"upper\" expects only 1 argument(s)",
        ),
        (
            "parseint(\"zz\", 10)",
            "cannot parse \"zz\" as a base 10 integer",
        ),
        ("format(\"%d\")", "not enough arguments for \"%d\""),
        ("base64decode(\"!!\")", "failed to decode base64 data"),
        (
            "cidrsubnet(\"10.0.0.0/30\", 4, 0)",
            "insufficient address space to extend prefix of 30 by 4",
        ),
    ] {
        let err = ev(expr).unwrap_err();
        assert!(err.contains(want), "{expr}: {err}");
    }
}

#[test]
fn hostile_calls_are_refused_before_they_allocate() {
    for (expr, want) in [
        ("indent(100000000, \"a\\nb\")", "the result would exceed"),
        ("format(\"%100000000s\", \"x\")", "width too large"),
        (
            "replace(format(\"%10000s\", \"\"), \"\", format(\"%10000s\", \"x\"))",
            "the result would exceed",
        ),
        (
            "setproduct(range(1000), range(1000), range(1000))",
            "more than 1000000 elements",
        ),
        (
            "length([for a in range(1000) : [for b in range(1000) : [for c in range(1000) : c]]])",
            "Expression too complex",
        ),
    ] {
        let err = ev(expr).unwrap_err();
        assert!(err.contains(want), "{expr}: {err}");
    }
}

#[test]
fn file_functions_read_beside_the_job_only_where_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("motd.txt"), "hello\n").expect("write");
    std::fs::create_dir(dir.path().join("conf")).expect("mkdir");
    std::fs::write(dir.path().join("conf/a.hcl"), "").expect("write");
    std::fs::write(dir.path().join("conf/b.txt"), "").expect("write");
    let files = FileAccess {
        allowed: true,
        base_dir: dir.path().to_path_buf(),
    };
    let run = |e: &str| run(e, files.clone());
    assert_eq!(
        run("file(\"motd.txt\")"),
        Ok(Value::String("hello\n".into()))
    );
    assert_eq!(
        run("filebase64(\"motd.txt\")"),
        Ok(Value::String("aGVsbG8K".into()))
    );
    assert_eq!(run("fileexists(\"motd.txt\")"), Ok(Value::Bool(true)));
    assert_eq!(run("fileexists(\"nope.txt\")"), Ok(Value::Bool(false)));
    assert_eq!(
        run("fileset(\".\", \"conf/*.hcl\")"),
        Ok(Value::List(vec![Value::String("conf/a.hcl".into())]))
    );
    assert_eq!(
        run("basename(\"/a/b.txt\")"),
        Ok(Value::String("b.txt".into()))
    );
    assert_eq!(run("dirname(\"/a/b.txt\")"), Ok(Value::String("/a".into())));
    assert!(
        run("file(\"nope.txt\")")
            .unwrap_err()
            .contains("no file exists at")
    );
    // Jobs that come over the network cannot read the server's disk.
    let err = ev("file(\"motd.txt\")").unwrap_err();
    assert!(err.contains("filesystem function disabled"), "{err}");
    assert!(
        ev("basename(\"/a\")")
            .unwrap_err()
            .contains("filesystem function disabled")
    );
}
