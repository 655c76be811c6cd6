package arrowjson

import "math"

// IEEE 754 binary16 (float16) conversions. arrow-go's float16.Num.Float32 gets
// subnormals wrong (0x0001 comes out as 1.1e-41 instead of 2^-24) and apache-arrow JS's
// float64ToUint16 rounds approximately, so both sides of the canonical encoding use
// these exact conversions: a float16 value is printed as the float64 it equals, and a
// number read for a float16 column is rounded to the nearest float16, ties to even.

// halfToFloat64 returns the value of the binary16 bits h exactly.
func halfToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}

// float64ToHalf rounds f to the nearest binary16, ties to even; magnitudes from 65520
// on become infinities and NaN the quiet NaN 0x7e00.
func float64ToHalf(f float64) uint16 {
	if math.IsNaN(f) {
		return 0x7e00
	}
	var sign uint16
	if math.Signbit(f) {
		sign = 0x8000
	}
	a := math.Abs(f)
	if a >= 65520 { // 65504 is the largest float16, 65520 the midpoint to 65536
		return sign | 0x7c00
	}
	if a < 0x1p-14 {
		// Subnormal (or zero): a multiple of 2^-24. 1024 (the smallest normal) falls
		// out as exponent 1, mantissa 0.
		return sign | uint16(math.RoundToEven(a*0x1p24))
	}
	_, e := math.Frexp(a) // a = frac * 2^e, frac in [0.5, 1)
	e--                   // 2^e <= a < 2^(e+1)
	m := math.RoundToEven(math.Ldexp(a, 10-e))
	if m == 2048 {
		m, e = 1024, e+1
	}
	if e > 15 {
		return sign | 0x7c00
	}
	return sign | uint16(e+15)<<10 | uint16(m-1024)
}
