use super::*;

fn source() -> Source {
    Source {
        name: "matmul.wgsl".into(),
        text: String::new(),
    }
}

fn spec() -> UserSpec {
    UserSpec {
        dispatch: vec!["cdiv(N, TILE)".into(), "cdiv(M, TILE)".into()],
        values: BTreeMap::from([("M".into(), 33), ("N".into(), 17), ("K".into(), 9)]),
        params: BTreeMap::from([
            ("TILE".into(), vec![4, 8]),
            ("WG".into(), vec![64, 128, 256]),
        ]),
        bindings: vec![
            "uniform u32 = M, N, K, 0".into(),
            "read f32[M*K]".into(),
            "read f16[K * N] ones".into(),
            "read_write f32[M*N]".into(),
        ],
        flops: Some("2*M*N*K".into()),
        ..UserSpec::default()
    }
}

#[test]
fn binding_lines_parse() {
    let b = BindingSpec::parse("read f32[M*K] random").unwrap();
    assert_eq!(
        (b.access, b.elem, b.count, b.init),
        (
            Access::Read,
            Elem::F32,
            Expr::Text("M*K".into()),
            Init::Random
        )
    );
    let b = BindingSpec::parse("read_write  u32[7]").unwrap();
    assert_eq!((b.count, b.init), (Expr::Int(7), Init::Zeros));
    let b = BindingSpec::parse("uniform u32 = M, 2, 0.5").unwrap();
    assert_eq!(b.count, Expr::Int(3));
    let b = BindingSpec::parse("read i32[N] file:data/x.bin").unwrap();
    assert_eq!(b.init, Init::File("data/x.bin".into(), None));
    for (line, says) in [
        ("write f32[4]", "not uniform, read or read_write"),
        ("read f64[4]", "`f64` is not f32"),
        ("read f32[4", "without `]`"),
        ("read f32", "no length"),
        ("uniform u32[4]", "a uniform needs its values"),
        ("read f32[4] noise", "`noise` is not random"),
        ("read", "expected `ACCESS TYPE[COUNT] [INIT]`"),
        ("uniform u32 =", "no values"),
    ] {
        let e = BindingSpec::parse(line).unwrap_err();
        assert!(e.contains(says) && e.contains(line), "{line}: {e}");
    }
}

#[test]
fn parameter_sets_and_instances() {
    let k = UserKernel::new(source(), spec(), None, None, &BTreeMap::new()).unwrap();
    assert_eq!(k.name, "matmul");
    let sets = k.param_sets();
    assert_eq!(sets.len(), 6);
    assert_eq!(
        sets[1],
        BTreeMap::from([("TILE".into(), 4), ("WG".into(), 128)])
    );
    let i = k.instance(3).unwrap();
    assert_eq!(i.label, "TILE=8 WG=64");
    assert_eq!(i.dispatch, [3, 5, 1]);
    assert_eq!(i.elements, [4, 33 * 9, 9 * 17, 33 * 17]);
    assert_eq!(
        i.bytes,
        4 * 33 * 9 + 2 * 9 * 17 + 4 * 33 * 17,
        "storage read once"
    );
    assert_eq!(i.flops, 2 * 33 * 17 * 9);
    assert_eq!(i.reference_dispatch, i.dispatch);
}

#[test]
fn bad_kernels_are_refused_with_the_reason() {
    let files = BTreeMap::new();
    let with = |f: &dyn Fn(&mut UserSpec)| {
        let mut s = spec();
        f(&mut s);
        UserKernel::new(source(), s, None, None, &files)
            .err()
            .unwrap_or_default()
    };
    assert!(with(&|s| s.bindings.clear()).contains("no bindings"));
    assert!(with(&|s| s.dispatch.clear()).contains("1 to 3 workgroup counts"));
    assert!(
        with(&|s| {
            s.values.insert("WG".into(), 1);
        })
        .contains("`WG` is both")
    );
    assert!(
        with(&|s| {
            s.params.insert("X".into(), vec![]);
        })
        .contains("`X` has no values")
    );
    assert!(
        with(&|s| {
            s.params.insert("X".into(), (0..11).collect());
        })
        .contains("66 parameter sets; at most 64")
    );
    assert!(
        with(&|s| {
            s.check = Some(CheckSpec {
                binding: 1,
                ..CheckSpec::default()
            });
        })
        .contains("binding 1 is not read_write")
    );
    assert!(
        with(&|s| {
            s.check = Some(CheckSpec {
                binding: 3,
                ..CheckSpec::default()
            });
        })
        .contains("needs a reference shader or a file")
    );
    assert!(
        with(&|s| s.bindings.push("read f32[4] file:gone.bin".into()))
            .contains("file:gone.bin was not read")
    );
    // Every parameter set's expressions evaluate: TILE=8 leaves no workgroup.
    let e = with(&|s| s.dispatch = vec!["cdiv(N, TILE) - 3".into()]);
    assert!(
        e.contains("parameter set TILE=8 WG=64: dispatch `cdiv(N, TILE) - 3` is 0: must be 1"),
        "{e}"
    );
    let e = with(&|s| s.bindings[1] = "read f32[M * K - 297]".into());
    assert!(e.contains("binding 1 has no elements"), "{e}");
}

#[test]
fn a_spec_reads_from_json() {
    let s: UserSpec = serde_json::from_str(
        r#"{"dispatch": ["cdiv(N, 64)"], "values": {"N": 100}, "bindings": ["read_write f32[N]"],
            "check": {"binding": 0, "expect": "y.bin", "tolerance": 0.01}}"#,
    )
    .unwrap();
    assert_eq!(s.dispatch, vec![Expr::Text("cdiv(N, 64)".into())]);
    let e = serde_json::from_str::<UserSpec>(r#"{"dispach": [1]}"#).unwrap_err();
    assert!(e.to_string().contains("unknown field `dispach`"), "{e}");
}

#[test]
fn the_shipped_examples_picked_together_make_one_kernel() {
    let ex = |name: &str, text: &str| (name.to_string(), text.as_bytes().to_vec());
    let mut files = BTreeMap::from([
        ex(
            "matmul_tiled.wgsl",
            include_str!("../../../examples/kernels/matmul_tiled.wgsl"),
        ),
        ex(
            "matmul_tiled.toml",
            include_str!("../../../examples/kernels/matmul_tiled.toml"),
        ),
    ]);
    let e = UserKernel::from_picked(&files).unwrap_err();
    assert!(e.contains("names matmul_naive.wgsl: pick it too"), "{e}");
    files.insert(
        "matmul_naive.wgsl".into(),
        include_str!("../../../examples/kernels/matmul_naive.wgsl").into(),
    );
    let k = UserKernel::from_picked(&files).unwrap();
    assert_eq!(k.name, "matmul_tiled");
    assert_eq!(k.reference.as_ref().unwrap().name, "matmul_naive.wgsl");
    assert_eq!(k.param_sets().len(), 2);
    assert_eq!(k.instance(1).unwrap().dispatch, [5, 9, 1]);
    // Two kernels and no spec: which one is meant is not guessed.
    files.remove("matmul_tiled.toml");
    let e = UserKernel::from_picked(&files).unwrap_err();
    assert!(e.contains("several .wgsl files and no spec"), "{e}");
    // Every shipped spec reads.
    for (name, text) in [
        (
            "matmul_naive.toml",
            include_str!("../../../examples/kernels/matmul_naive.toml"),
        ),
        (
            "bandwidth_read.toml",
            include_str!("../../../examples/kernels/bandwidth_read.toml"),
        ),
    ] {
        UserSpec::parse(name, text).unwrap_or_else(|e| panic!("{e}"));
    }
    let e = UserSpec::parse("bad.toml", "dispatch = [1\n").unwrap_err();
    assert!(e.contains("spec bad.toml") && e.contains("line"), "{e}");
}
