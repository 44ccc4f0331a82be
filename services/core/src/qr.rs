//! QR codes as PNG images (qrcode crate for the symbol, png crate for the file).

use base64::Engine;

/// Pixels per module and modules of quiet zone around the symbol.
const SCALE: usize = 8;
const QUIET: usize = 4;

/// Why a QR image could not be made.
#[derive(Debug, thiserror::Error)]
pub enum QrError {
    #[error("the payload does not fit a QR code: {0}")]
    Symbol(#[from] qrcode::types::QrError),
    #[error("encoding the PNG failed: {0}")]
    Png(#[from] png::EncodingError),
}

/// The QR symbol of `payload` as a PNG `data:` URL.
pub fn png_data_url(payload: &str) -> Result<String, QrError> {
    let code = qrcode::QrCode::new(payload.as_bytes())?;
    let modules = code.width();
    let colors = code.to_colors();
    let side = (modules + 2 * QUIET) * SCALE;
    let mut pixels = vec![255u8; side * side];
    for (i, c) in colors.iter().enumerate() {
        if *c == qrcode::Color::Dark {
            let (mx, my) = (i % modules + QUIET, i / modules + QUIET);
            for y in my * SCALE..(my + 1) * SCALE {
                pixels[y * side + mx * SCALE..y * side + (mx + 1) * SCALE].fill(0);
            }
        }
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, side as u32, side as u32);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header()?;
        w.write_image_data(&pixels)?;
    }
    Ok(format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(out)))
}

#[cfg(test)]
mod tests {
    use base64::Engine;

    #[test]
    fn renders_a_png_whose_dark_modules_match_the_symbol() {
        let url = super::png_data_url("2@hello,world").unwrap();
        let b64 = url.strip_prefix("data:image/png;base64,").unwrap();
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        let code = qrcode::QrCode::new(b"2@hello,world").unwrap();
        let side = (code.width() + 8) * 8;
        assert_eq!((info.width as usize, info.height as usize), (side, side));
        // The top-left finder pattern's corner module is dark, the quiet zone light.
        assert_eq!(buf[(4 * 8) * side + 4 * 8], 0);
        assert_eq!(buf[0], 255);
    }
}
