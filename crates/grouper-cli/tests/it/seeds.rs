//! `grouper bench seeds luan --quick`: every scheme measured (each answer's group count is
//! checked inside), the JSON, the plots and a report with a verdict per finding; `--resume`
//! keeps the points of the same commit and measures nothing again; co-processing says it
//! needs a GPU.

use std::process::Command;

use serde_json::Value;

fn seeds(out: &std::path::Path, resume: bool) -> String {
    let mut args = vec![
        "bench",
        "seeds",
        "luan",
        "--quick",
        "--reps",
        "1",
        "--threads",
        "2",
    ];
    if resume {
        args.extend(["--resume", "--parts", "cpu"]);
    }
    let o = Command::new(env!("CARGO_BIN_EXE_grouper"))
        .args(args)
        .arg("--out-dir")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn luan_seeds_measure_every_scheme_and_report_each_finding() {
    let out = std::env::temp_dir().join(format!("grouper-seeds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let first = seeds(&out, false);
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("luan-cpu.json")).unwrap()).unwrap();
    let points = json["points"].as_array().unwrap();
    for table in [
        "Linear-I",
        "Chain-I",
        "Chain+-I",
        "Cuckoo2-I",
        "Cuckoo4-I",
        "Linear-S",
    ] {
        let times: Vec<f64> = points
            .iter()
            .filter(|p| p["key"]["table"] == table)
            .map(|p| p["ms"].as_f64().unwrap())
            .collect();
        assert!(times.len() >= 20, "{table}: {} points", times.len());
        assert!(times.iter().all(|t| t.is_finite() && *t > 0.0), "{table}");
    }
    assert!(json["cuckoo_rebuilds"]["0.9"]["cuckoo2"].is_u64());
    let md = std::fs::read_to_string(out.join("luan-cpu.md")).unwrap();
    let verdicts = md
        .lines()
        .filter(|l| l.starts_with("| Fig.") || l.starts_with("| §"))
        .filter(|l| l.contains("| yes |") || l.contains("| **no** |"))
        .count();
    assert_eq!(verdicts, 8, "every finding has a verdict:\n{md}");
    for plot in [
        "luan-cpu-schemes-lf50.svg",
        "luan-cpu-zipf3.svg",
        "luan-cpu-data-size.svg",
    ] {
        let svg = std::fs::read_to_string(out.join(plot)).unwrap();
        assert!(
            svg.contains("Linear-I") && svg.contains("Cuckoo4-I"),
            "{plot}"
        );
    }
    assert!(first.lines().filter(|l| l.ends_with(" ms")).count() >= points.len());
    // Co-processing needs a GPU, and says so without one.
    if std::env::var("GROUPER_REQUIRE_GPU").is_err() {
        assert!(
            first.contains("co-processing (Luan Fig. 15): not measured"),
            "{first}"
        );
    }
    // Resumed: the same points, none measured again.
    let again = seeds(&out, true);
    assert_eq!(
        again.lines().filter(|l| l.ends_with(" ms")).count(),
        0,
        "{again}"
    );
    let json2: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("luan-cpu.json")).unwrap()).unwrap();
    assert_eq!(json2["points"].as_array().unwrap().len(), points.len());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn sort_atomics_seeds_time_every_variant_over_the_five_distributions() {
    let out = std::env::temp_dir().join(format!("grouper-seeds-sa-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(env!("CARGO_BIN_EXE_grouper"))
        .args([
            "bench",
            "seeds",
            "sort-atomics",
            "--quick",
            "--reps",
            "1",
            "--threads",
            "2",
        ])
        .arg("--out-dir")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sort-atomics-cpu.json")).unwrap())
            .unwrap();
    let points = json["points"].as_array().unwrap();
    assert_eq!(points.len(), 5 * 4, "five distributions, four variants");
    for p in points {
        assert!(p["ms"].as_f64().is_some_and(|t| t > 0.0), "{p}");
    }
    // Random keys: 10,001 values at most; Weibull and normal near-unique over 2^20 rows.
    let groups = |d: &str| {
        points.iter().find(|p| p["dist"] == d).unwrap()["groups"]
            .as_u64()
            .unwrap()
    };
    assert!(groups("random") <= 10_001 && groups("random") > 9_000);
    assert!(groups("normal") > 100_000, "{}", groups("normal"));
    let md = std::fs::read_to_string(out.join("sort-atomics-cpu.md")).unwrap();
    let verdicts = md
        .lines()
        .filter(|l| l.starts_with("| Fig. 10"))
        .filter(|l| l.contains("| yes |") || l.contains("| **no** |"))
        .count();
    assert_eq!(verdicts, 3, "{md}");
    assert!(out.join("sort-atomics-cpu-distributions.svg").exists());
    let _ = std::fs::remove_dir_all(&out);
}
