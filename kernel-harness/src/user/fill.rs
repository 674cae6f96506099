//! A user's kernel's bindings filled: what each line's INIT asks for, in bytes.

use tokenscope_kernel_spec::{BindingSpec, Elem, Init, Vars, expr};

/// The first contents of binding `b`, `elements` of them, `key` seeding random ones.
pub fn contents(b: &BindingSpec, elements: u64, vars: &Vars, key: u32) -> Result<Vec<u8>, String> {
    let n = elements as usize;
    let mut out = Vec::with_capacity(b.bytes(elements) as usize);
    match &b.init {
        Init::Random => {
            for i in 0..n {
                let h = crate::data::hash_word(key, i as u32);
                match b.elem {
                    Elem::U32 | Elem::I32 => out.extend(h.to_le_bytes()),
                    float => float.write(f64::from(h >> 8) / f64::from(1u32 << 23) - 1.0, &mut out),
                }
            }
        }
        Init::Zeros => out.resize(n * b.elem.size() as usize, 0),
        Init::Ones => (0..n).for_each(|_| b.elem.write(1.0, &mut out)),
        Init::Values(v) => {
            if v.len() != n {
                return Err(format!("{} values for {n} elements", v.len()));
            }
            for text in v {
                let float = matches!(b.elem, Elem::F32 | Elem::F16)
                    .then(|| text.parse::<f64>().ok())
                    .flatten();
                let value = match float {
                    Some(v) => v,
                    None => expr::eval(text, vars)? as f64,
                };
                b.elem.write(value, &mut out);
            }
        }
        Init::File(path, bytes) => {
            let bytes = bytes
                .as_ref()
                .ok_or_else(|| format!("file:{path} was not read"))?;
            let want = n * b.elem.size() as usize;
            if bytes.len() != want {
                return Err(format!(
                    "file:{path} has {} bytes, the binding {want} ({n} x {})",
                    bytes.len(),
                    b.elem.size()
                ));
            }
            out.extend_from_slice(bytes);
        }
    }
    out.resize(b.bytes(elements) as usize, 0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contents_are_what_the_line_says() {
        let vars = Vars::from([("M".into(), 5)]);
        let u = BindingSpec::parse("uniform u32 = M, 7").unwrap();
        let bytes = contents(&u, 2, &vars, 1).unwrap();
        assert_eq!(bytes.len(), 16, "a uniform is whole 16 bytes");
        assert_eq!(&bytes[..8], &[5, 0, 0, 0, 7, 0, 0, 0]);
        let f = BindingSpec::parse("uniform f32 = 0.5, M").unwrap();
        let bytes = contents(&f, 2, &vars, 1).unwrap();
        assert_eq!(
            (Elem::F32.read(&bytes, 0), Elem::F32.read(&bytes, 1)),
            (0.5, 5.0)
        );
        let h = BindingSpec::parse("read f16[3] ones").unwrap();
        let bytes = contents(&h, 3, &vars, 1).unwrap();
        assert_eq!(bytes.len(), 8, "whole words");
        assert_eq!(Elem::F16.read(&bytes, 2), 1.0);
        let r = BindingSpec::parse("read f32[1000]").unwrap();
        let bytes = contents(&r, 1000, &vars, 9).unwrap();
        let v: Vec<f64> = (0..1000).map(|i| Elem::F32.read(&bytes, i)).collect();
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        assert!(v.iter().any(|x| *x < -0.5) && v.iter().any(|x| *x > 0.5));
        assert_eq!(bytes, contents(&r, 1000, &vars, 9).unwrap(), "seeded");
        assert_ne!(bytes, contents(&r, 1000, &vars, 10).unwrap());
        let e = contents(&u, 3, &vars, 1).unwrap_err();
        assert!(e.contains("2 values for 3 elements"), "{e}");
        let mut file = BindingSpec::parse("read u32[2] file:x.bin").unwrap();
        file.init = Init::File("x.bin".into(), Some(std::sync::Arc::new(vec![1; 6])));
        let e = contents(&file, 2, &vars, 1).unwrap_err();
        assert!(e.contains("6 bytes, the binding 8"), "{e}");
    }
}
