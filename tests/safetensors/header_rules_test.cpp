// Every rule of the reference reader (huggingface/safetensors `SafeTensors::read_metadata` +
// `Metadata::validate`, see reference §1.2-§1.6) with the exact ErrorKind, in the reference's order, and
// our stricter rules (DuplicateKey, NonCanonicalEntry, UnknownField) that only inputs the reference
// accepts may reach.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace {

using namespace swt;
using safeweights::safetensors::Header;
using safeweights::safetensors::kMaxHeaderSize;
using safeweights::safetensors::kMaxJsonDepth;
using safeweights::safetensors::ReadOptions;
using K = safeweights::ErrorKind;

constexpr std::uint64_t kU64Max = ~std::uint64_t{0};

// {"name": entry}
std::string obj1(std::string_view name, std::string_view ent) { return "{\"" + std::string(name) + "\":" + std::string(ent) + "}"; }
// A valid one-tensor file: t F32 [2] [0,8] + 8 bytes.
std::string valid_json() { return obj1("t", entry("F32", "2", 0, 8)); }

struct RuleCase {
  std::string name;
  std::string bytes;
  std::optional<K> expect;  // nullopt: must parse
  bool strict = false;      // ReadOptions{.reject_unknown_fields = true}
  std::string tensor = {};  // expected error context tensor, when not empty
};

std::vector<RuleCase> cases() {
  std::vector<RuleCase> v;
  auto fail = [&](std::string name, std::string bytes, K k, std::string tensor = {}) {
    v.push_back({std::move(name), std::move(bytes), k, false, std::move(tensor)});
  };
  auto ok = [&](std::string name, std::string bytes) { v.push_back({std::move(name), std::move(bytes), {}}); };
  auto json_fail = [&](std::string name, std::string json, K k, std::uint64_t data = 0) { fail(std::move(name), st_file(json, data), k); };
  auto json_ok = [&](std::string name, std::string json, std::uint64_t data = 0) { ok(std::move(name), st_file(json, data)); };

  // ---- §1.2 steps 1-4: length prefix --------------------------------------------------------------
  for (int n = 0; n < 8; ++n) fail("TooSmall_" + std::to_string(n) + "_bytes", std::string(static_cast<std::size_t>(n), '\0'), K::HeaderTooSmall);
  fail("TooSmall_7_bytes_of_ff", std::string(7, '\xff'), K::HeaderTooSmall);
  // The reference's own vector: 8 bytes, N = 0xffffff000000003c. The cap comes before the length check.
  fail("TooLarge_reference_vector", std::string("<\0\0\0\0\xff\xff\xff", 8), K::HeaderTooLarge);
  fail("TooLarge_cap_plus_one_short_file", with_n(kMaxHeaderSize + 1, "{}"), K::HeaderTooLarge);
  fail("TooLarge_u64_max", with_n(kU64Max, "{}"), K::HeaderTooLarge);
  fail("TooLarge_8_plus_N_would_wrap", with_n(kU64Max - 7, ""), K::HeaderTooLarge);
  // N == cap passes the cap; the file is too short.
  fail("InvalidLength_N_equals_cap", with_n(kMaxHeaderSize, "{}"), K::InvalidHeaderLength);
  fail("InvalidLength_1000_vs_10", with_n(1000, std::string(10, ' ')), K::InvalidHeaderLength);
  fail("InvalidLength_one_past_end", with_n(3, "{}"), K::InvalidHeaderLength);
  fail("InvalidLength_nothing_after_prefix", with_n(1, ""), K::InvalidHeaderLength);
  // N = 0 passes the length checks and fails as empty JSON.
  fail("N0_empty_json", with_n(0, ""), K::InvalidHeaderDeserialization);
  fail("N0_with_following_bytes", with_n(0, "{}"), K::InvalidHeaderDeserialization);
  ok("N_exact_end_of_file", with_n(2, "{}"));

  // ---- §1.2 step 5: UTF-8 -------------------------------------------------------------------------
  json_fail("Utf8_single_ff", "\xff", K::InvalidHeader);
  json_fail("Utf8_before_json_error", "{\xff", K::InvalidHeader);
  json_fail("Utf8_in_tensor_name", obj1("a\xff", entry("F32", "2", 0, 8)), K::InvalidHeader, 8);
  json_fail("Utf8_overlong_slash", "{\"\xc0\xaf\":1}", K::InvalidHeader);
  json_fail("Utf8_encoded_surrogate", obj1("\xed\xa0\x80", entry("F32", "2", 0, 8)), K::InvalidHeader, 8);
  json_fail("Utf8_above_10ffff", obj1("\xf4\x90\x80\x80", entry("F32", "2", 0, 8)), K::InvalidHeader, 8);
  json_fail("Utf8_lone_continuation", obj1("\x80", entry("F32", "2", 0, 8)), K::InvalidHeader, 8);
  json_fail("Utf8_truncated_sequence_at_end", "{}\xe2\x82", K::InvalidHeader);
  json_fail("Utf8_in_padding", "{}  \xfe ", K::InvalidHeader);
  json_ok("Utf8_multibyte_name", obj1("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", entry("F32", "2", 0, 8)), 8);
  // Bytes after the header are data, never UTF-8 checked.
  ok("Utf8_data_section_is_not_checked", st_file(valid_json(), 8, '\xff'));

  // ---- §1.3: JSON grammar and top level -----------------------------------------------------------
  json_fail("Json_open_brace_only", "{", K::InvalidHeaderDeserialization);
  json_fail("Json_bom", "\xef\xbb\xbf{}", K::InvalidHeaderDeserialization);
  json_fail("Json_trailing_nul", std::string("{}\0", 3), K::InvalidHeaderDeserialization);
  json_fail("Json_nul_padding", std::string("{}\0\0\0\0\0\0", 8), K::InvalidHeaderDeserialization);
  json_fail("Json_trailing_garbage", "{}x", K::InvalidHeaderDeserialization);
  json_fail("Json_two_objects", "{} {}", K::InvalidHeaderDeserialization);
  json_fail("Json_top_array", "[]", K::InvalidHeaderDeserialization);
  json_fail("Json_top_string", "\"x\"", K::InvalidHeaderDeserialization);
  json_fail("Json_top_null", "null", K::InvalidHeaderDeserialization);
  json_fail("Json_top_number", "1", K::InvalidHeaderDeserialization);
  json_fail("Json_only_whitespace", "        ", K::InvalidHeaderDeserialization);
  json_fail("Json_trailing_comma", "{\"t\":" + entry("F32", "2", 0, 8) + ",}", K::InvalidHeaderDeserialization, 8);
  json_fail("Json_trailing_comma_in_array", obj1("t", entry("F32", "2,", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("Json_single_quotes", "{'t':1}", K::InvalidHeaderDeserialization);
  json_fail("Json_comment", "{/**/}", K::InvalidHeaderDeserialization);
  json_fail("Json_line_comment", "{}//", K::InvalidHeaderDeserialization);
  json_fail("Json_unquoted_key", "{t:" + entry("F32", "2", 0, 8) + "}", K::InvalidHeaderDeserialization, 8);
  json_fail("Json_missing_colon", "{\"t\" " + entry("F32", "2", 0, 8) + "}", K::InvalidHeaderDeserialization, 8);
  json_fail("Json_vertical_tab_is_not_whitespace", "\x0b{}", K::InvalidHeaderDeserialization);
  json_fail("Json_form_feed_is_not_whitespace", "{}\x0c", K::InvalidHeaderDeserialization);
  json_fail("Json_nbsp_is_not_whitespace", "\xc2\xa0{}", K::InvalidHeaderDeserialization);
  json_ok("Json_leading_and_trailing_whitespace", "\x09\x0a{}\x0d\x20");
  json_ok("Json_reference_padding", "{}      ");
  json_ok("Json_whitespace_everywhere", " {\n\t\"t\" :\r{ \"dtype\" : \"F32\" , \"shape\" : [ 2 ] , \"data_offsets\" : [ 0 , 8 ] } }\n", 8);
  json_ok("Json_leading_whitespace_with_tensor", "\n\n\n\n" + valid_json(), 8);

  // ---- §1.3: strings ------------------------------------------------------------------------------
  json_fail("String_raw_control_char_in_name", obj1("a\x01", entry("F32", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("String_raw_newline_in_name", obj1("a\nb", entry("F32", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("String_raw_tab_in_metadata", "{\"__metadata__\":{\"k\":\"a\tb\"}}", K::InvalidHeaderDeserialization);
  json_fail("String_lone_high_surrogate", obj1("\\ud800", entry("F32", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("String_lone_low_surrogate", obj1("\\udc00", entry("F32", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("String_high_surrogate_then_letter", obj1("\\ud800\\u0041", entry("F32", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("String_lone_surrogate_in_metadata", "{\"__metadata__\":{\"k\":\"\\ud800\"}}", K::InvalidHeaderDeserialization);
  json_fail("String_bad_escape_x", obj1("\\x41", entry("F32", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("String_bad_escape_quote", obj1("\\'", entry("F32", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("String_short_unicode_escape", obj1("\\u12", entry("F32", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("String_bad_hex_digit", obj1("\\u00g0", entry("F32", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("String_unterminated", "{\"t", K::InvalidHeaderDeserialization);
  json_ok("String_surrogate_pair", obj1("\\ud83d\\ude00", entry("F32", "2", 0, 8)), 8);
  json_ok("String_escaped_nul", obj1("a\\u0000b", entry("F32", "2", 0, 8)), 8);
  json_ok("String_raw_del_0x7f", obj1("a\x7f", entry("F32", "2", 0, 8)), 8);
  json_ok("String_empty_name", obj1("", entry("F32", "2", 0, 8)), 8);
  json_ok("String_all_short_escapes", obj1("\\\"\\\\\\/\\b\\f\\n\\r\\t", entry("F32", "2", 0, 8)), 8);

  // ---- §1.3: __metadata__ -------------------------------------------------------------------------
  json_fail("Metadata_number_value", "{\"__metadata__\":{\"k\":1}}", K::InvalidHeaderDeserialization);
  json_fail("Metadata_bool_value", "{\"__metadata__\":{\"k\":true}}", K::InvalidHeaderDeserialization);
  json_fail("Metadata_null_value", "{\"__metadata__\":{\"k\":null}}", K::InvalidHeaderDeserialization);
  json_fail("Metadata_object_value", "{\"__metadata__\":{\"k\":{}}}", K::InvalidHeaderDeserialization);
  json_fail("Metadata_array_value", "{\"__metadata__\":{\"k\":[\"v\"]}}", K::InvalidHeaderDeserialization);
  json_fail("Metadata_is_array", "{\"__metadata__\":[]}", K::InvalidHeaderDeserialization);
  json_fail("Metadata_is_string", "{\"__metadata__\":\"pt\"}", K::InvalidHeaderDeserialization);
  json_fail("Metadata_is_number", "{\"__metadata__\":0}", K::InvalidHeaderDeserialization);
  // A tensor named __metadata__ (issue #849) is read as metadata, whose values must be strings.
  json_fail("Metadata_tensor_named_metadata", obj1("__metadata__", entry("F32", "1", 0, 4)), K::InvalidHeaderDeserialization, 4);
  json_fail("Metadata_duplicate", "{\"__metadata__\":{},\"__metadata__\":{}}", K::InvalidHeaderDeserialization);
  json_fail("Metadata_duplicate_null_first", "{\"__metadata__\":null,\"__metadata__\":{\"a\":\"b\"}}", K::InvalidHeaderDeserialization);
  json_fail("Metadata_duplicate_by_escape", "{\"__metadata__\":{},\"\\u005f_metadata__\":{}}", K::InvalidHeaderDeserialization);
  json_fail("Metadata_duplicate_far_apart", "{\"__metadata__\":{\"a\":\"b\"},\"t\":" + entry("F32", "2", 0, 8) + ",\"__metadata__\":{}}",
            K::InvalidHeaderDeserialization, 8);
  json_ok("Metadata_after_tensors", "{\"t\":" + entry("F32", "2", 0, 8) + ",\"__metadata__\":{\"a\":\"b\"}}", 8);

  // ---- §1.3: tensor entry schema -------------------------------------------------------------------
  json_fail("Entry_missing_dtype", obj1("t", "{\"shape\":[2],\"data_offsets\":[0,8]}"), K::InvalidHeaderDeserialization, 8);
  json_fail("Entry_missing_shape", obj1("t", "{\"dtype\":\"F32\",\"data_offsets\":[0,8]}"), K::InvalidHeaderDeserialization, 8);
  json_fail("Entry_missing_offsets", obj1("t", "{\"dtype\":\"F32\",\"shape\":[2]}"), K::InvalidHeaderDeserialization, 8);
  json_fail("Entry_empty_object", obj1("t", "{}"), K::InvalidHeaderDeserialization);
  json_fail("Entry_duplicate_dtype", obj1("t", "{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"),
            K::InvalidHeaderDeserialization, 8);
  json_fail("Entry_duplicate_shape", obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"shape\":[2],\"data_offsets\":[0,8]}"),
            K::InvalidHeaderDeserialization, 8);
  json_fail("Entry_duplicate_offsets", obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"data_offsets\":[0,8]}"),
            K::InvalidHeaderDeserialization, 8);
  json_fail("Entry_duplicate_field_by_escape", obj1("t", "{\"dtype\":\"F32\",\"\\u0064type\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"),
            K::InvalidHeaderDeserialization, 8);
  json_fail("Entry_is_string", obj1("t", "\"F32\""), K::InvalidHeaderDeserialization);
  json_fail("Entry_is_number", obj1("t", "1"), K::InvalidHeaderDeserialization);
  json_fail("Entry_is_null", obj1("t", "null"), K::InvalidHeaderDeserialization);
  json_fail("Entry_is_bool", obj1("t", "false"), K::InvalidHeaderDeserialization);
  json_fail("Dtype_unknown", obj1("t", entry("F128", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_lowercase", obj1("t", entry("f32", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_mixed_case", obj1("t", entry("Bf16", "4", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_numpy_name", obj1("t", entry("float32", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_with_space", obj1("t", entry("F32 ", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_empty", obj1("t", entry("", "2", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_old_E8M0_alias", obj1("t", entry("E8M0", "8", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_is_number", obj1("t", "{\"dtype\":17,\"shape\":[2],\"data_offsets\":[0,8]}"), K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_is_null", obj1("t", "{\"dtype\":null,\"shape\":[2],\"data_offsets\":[0,8]}"), K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_is_array", obj1("t", "{\"dtype\":[\"F32\"],\"shape\":[2],\"data_offsets\":[0,8]}"), K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_object_form_two_keys", obj1("t", "{\"dtype\":{\"F32\":null,\"I32\":null},\"shape\":[2],\"data_offsets\":[0,8]}"),
            K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_object_form_non_null_value", obj1("t", "{\"dtype\":{\"F32\":1},\"shape\":[2],\"data_offsets\":[0,8]}"),
            K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_object_form_unknown_variant", obj1("t", "{\"dtype\":{\"F33\":null},\"shape\":[2],\"data_offsets\":[0,8]}"),
            K::InvalidHeaderDeserialization, 8);
  json_fail("Dtype_object_form_empty", obj1("t", "{\"dtype\":{},\"shape\":[2],\"data_offsets\":[0,8]}"), K::InvalidHeaderDeserialization, 8);
  json_ok("Entry_fields_in_any_order", obj1("t", "{\"data_offsets\":[0,8],\"shape\":[2],\"dtype\":\"F32\"}"), 8);
  json_ok("Entry_escaped_dtype_value", obj1("t", "{\"dtype\":\"\\u0046\\u0033\\u0032\",\"shape\":[2],\"data_offsets\":[0,8]}"), 8);
  json_ok("Entry_escaped_field_names", obj1("t", "{\"\\u0064type\":\"F32\",\"\\u0073hape\":[2],\"data\\u005foffsets\":[0,8]}"), 8);
  json_fail("Entry_escaped_dtype_value_wrong", obj1("t", "{\"dtype\":\"\\u0066\\u0033\\u0032\",\"shape\":[2],\"data_offsets\":[0,8]}"),
            K::InvalidHeaderDeserialization, 8);
  {
    std::string ones;
    for (int k = 0; k < 1000; ++k) ones += k ? ",1" : "1";
    json_ok("Shape_rank_1000", obj1("t", entry("U8", ones, 0, 1)), 1);
  }
  json_fail("Shape_is_number", obj1("t", "{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}"), K::InvalidHeaderDeserialization, 8);
  json_fail("Shape_is_null", obj1("t", "{\"dtype\":\"F32\",\"shape\":null,\"data_offsets\":[0,8]}"), K::InvalidHeaderDeserialization, 8);
  json_fail("Shape_nested_array", obj1("t", entry("F32", "[2]", 0, 8)), K::InvalidHeaderDeserialization, 8);
  json_fail("Offsets_length_0", obj1("t", entry("F32", "2", "")), K::InvalidHeaderDeserialization, 8);
  json_fail("Offsets_length_1", obj1("t", entry("F32", "2", "8")), K::InvalidHeaderDeserialization, 8);
  json_fail("Offsets_length_3", obj1("t", entry("F32", "2", "0,8,8")), K::InvalidHeaderDeserialization, 8);
  json_fail("Offsets_is_object", obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":{\"0\":0,\"1\":8}}"), K::InvalidHeaderDeserialization,
            8);
  json_fail("Offsets_is_null", obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":null}"), K::InvalidHeaderDeserialization, 8);

  // ---- §1.3: integers (serde usize) ----------------------------------------------------------------
  const char* bad_numbers[] = {
      "-1",   "-0",   "1.0",   "1e3", "1E3",      "01",  "00", "18446744073709551616", "99999999999999999999999", "0.5", "2e0", "-1e3", "+1",
      "true", "null", "\"2\"", "0x2", "Infinity", "NaN", ".5"};
  int i = 0;
  for (const char* n : bad_numbers) {
    const std::string idx = std::to_string(i++);
    json_fail("Number_in_shape_" + idx, obj1("t", entry("F32", n, 0, 8)), K::InvalidHeaderDeserialization, 8);
    json_fail("Number_in_shape_second_" + idx, obj1("t", entry("F32", std::string("2,") + n, 0, 8)), K::InvalidHeaderDeserialization, 8);
    json_fail("Number_in_begin_" + idx, obj1("t", entry("F32", "2", std::string(n) + ",8")), K::InvalidHeaderDeserialization, 8);
    json_fail("Number_in_end_" + idx, obj1("t", entry("F32", "2", std::string("0,") + n)), K::InvalidHeaderDeserialization, 8);
  }
  // u64::MAX is a valid usize; it then fails validation.
  fail("Number_u64_max_in_shape_overflows", st_file(obj1("t", entry("F32", "18446744073709551615", 0, 8)), 8), K::ValidationOverflow, "t");
  fail("Number_u64_max_in_end", st_file(obj1("t", entry("U8", "1", "0,18446744073709551615")), 1), K::TensorInvalidInfo, "t");
  json_ok("Number_zero_dims", obj1("t", entry("F32", "0,0", 0, 0)));

  // ---- §1.5: per-tensor validation -----------------------------------------------------------------
  {
    // test_json_attack: 10 tensors all at [0,16].
    std::string j = "{";
    for (int k = 0; k < 10; ++k) {
      if (k) j += ",";
      j += "\"weight_" + std::to_string(k) + "\":" + entry("F32", "2,2", 0, 16);
    }
    j += "}";
    json_fail("Validate_json_attack", j, K::InvalidOffset, 16);
  }
  fail("Validate_hole", st_file("{\"a\":" + entry("F32", "1", 0, 4) + ",\"b\":" + entry("F32", "1", 8, 12) + "}", 12), K::InvalidOffset, "b");
  fail("Validate_overlap", st_file("{\"a\":" + entry("F32", "2", 0, 8) + ",\"b\":" + entry("F32", "2", 4, 12) + "}", 12), K::InvalidOffset, "b");
  fail("Validate_not_starting_at_0", st_file(obj1("a", entry("F32", "1", 4, 8)), 8), K::InvalidOffset, "a");
  fail("Validate_end_before_begin", st_file("{\"a\":" + entry("F32", "1", 0, 4) + ",\"b\":" + entry("F32", "1", 4, 2) + "}", 4), K::InvalidOffset,
       "b");
  fail("Validate_zero_sized_inside_other", st_file("{\"a\":" + entry("F32", "2", 0, 8) + ",\"z\":" + entry("F32", "0", 4, 4) + "}", 8),
       K::InvalidOffset, "z");
  fail("Validate_duplicate_range", st_file("{\"a\":" + entry("F32", "1", 0, 4) + ",\"b\":" + entry("F32", "1", 0, 4) + "}", 8), K::InvalidOffset);
  // Sorting is by (begin, end): z (0,0) precedes a (0,4) whatever the JSON order.
  json_ok("Validate_sort_by_begin_then_end", "{\"a\":" + entry("F32", "1", 0, 4) + ",\"z\":" + entry("F32", "0", 0, 0) + "}", 4);
  json_ok("Validate_json_order_irrelevant", "{\"b\":" + entry("F32", "1", 4, 8) + ",\"a\":" + entry("F32", "1", 0, 4) + "}", 8);
  fail("Validate_invalid_info_2x2_i32", st_file(obj1("t", entry("I32", "2,2", 0, 4)), 4), K::TensorInvalidInfo, "t");
  fail("Validate_invalid_info_too_long", st_file(obj1("t", entry("I32", "2,2", 0, 20)), 20), K::TensorInvalidInfo, "t");
  fail("Validate_invalid_info_rank0", st_file(obj1("t", entry("I32", "", 0, 8)), 8), K::TensorInvalidInfo, "t");
  fail("Validate_invalid_info_zero_sized_with_bytes", st_file(obj1("t", entry("F32", "2,0", 0, 4)), 4), K::TensorInvalidInfo, "t");
  fail("Validate_overflow_2_x_2pow64m2", st_file(obj1("t", entry("F32", "2,18446744073709551614", 0, 8)), 8), K::ValidationOverflow, "t");
  fail("Validate_overflow_2_x_2pow63m1", st_file(obj1("t", entry("F32", "2,9223372036854775807", 0, 8)), 8), K::ValidationOverflow, "t");
  fail("Validate_overflow_bits_u8_2pow61", st_file(obj1("t", entry("U8", "2305843009213693952", 0, 8)), 8), K::ValidationOverflow, "t");
  fail("Validate_no_overflow_u8_2pow61m1", st_file(obj1("t", entry("U8", "2305843009213693951", 0, 8)), 8), K::TensorInvalidInfo, "t");
  // The product is folded left to right with checked multiplication: an overflow before a zero dim
  // still overflows, a zero dim first keeps the product at 0.
  fail("Validate_overflow_before_zero_dim", st_file(obj1("t", entry("F64", "18446744073709551615,2,0", 0, 0))), K::ValidationOverflow, "t");
  json_ok("Validate_zero_dim_before_huge", obj1("t", entry("F64", "0,18446744073709551615,2", 0, 0)));
  fail("Validate_f4_1x3_misaligned", st_file(obj1("t", entry("F4", "1,3", 0, 2)), 2), K::MisalignedSlice, "t");
  fail("Validate_f4_rank0_misaligned", st_file(obj1("t", entry("F4", "", 0, 1)), 1), K::MisalignedSlice, "t");
  fail("Validate_f4_misaligned_before_invalid_info", st_file(obj1("t", entry("F4", "3", 0, 100)), 100), K::MisalignedSlice, "t");
  json_ok("Validate_f4_3x2", obj1("t", entry("F4", "3,2", 0, 3)), 3);
  json_ok("Validate_f4_1x2", obj1("t", entry("F4", "1,2", 0, 1)), 1);
  fail("Validate_f6_e2m3_2_elems", st_file(obj1("t", entry("F6_E2M3", "2", 0, 2)), 2), K::MisalignedSlice, "t");
  fail("Validate_f6_e3m2_6_elems", st_file(obj1("t", entry("F6_E3M2", "2,3", 0, 5)), 5), K::MisalignedSlice, "t");
  json_ok("Validate_f6_e2m3_4_elems", obj1("t", entry("F6_E2M3", "4", 0, 3)), 3);
  json_ok("Validate_f6_e3m2_2x4", obj1("t", entry("F6_E3M2", "2,4", 0, 6)), 6);
  fail("Validate_f6_4_elems_wrong_size", st_file(obj1("t", entry("F6_E2M3", "4", 0, 4)), 4), K::TensorInvalidInfo, "t");
  json_ok("Validate_zero_sized", obj1("t", entry("F32", "2,0", 0, 0)));
  json_ok("Validate_multiple_zero_sized",
          "{\"z1\":" + entry("F32", "0", 0, 0) + ",\"z2\":" + entry("I8", "3,0", 0, 0) + ",\"a\":" + entry("U8", "2", 0, 2) +
              ",\"z3\":" + entry("F16", "0,5", 2, 2) + "}",
          2);
  json_ok("Validate_rank0_is_one_element", obj1("t", entry("I32", "", 0, 4)), 4);
  json_ok("Validate_zero_tensors", "{}");
  json_ok("Validate_unpadded_odd_header", obj1("t", entry("U8", "3", 0, 3)), 3);
  // Order of rules: the first failing tensor in sorted order decides.
  fail("Order_invalid_info_before_hole", st_file("{\"a\":" + entry("I32", "2,2", 0, 4) + ",\"b\":" + entry("F32", "1", 8, 12) + "}", 12),
       K::TensorInvalidInfo, "a");
  fail("Order_hole_before_invalid_info",
       st_file("{\"a\":" + entry("F32", "1", 0, 4) + ",\"b\":" + entry("F32", "1", 8, 12) + ",\"c\":" + entry("I32", "2,2", 12, 14) + "}", 14),
       K::InvalidOffset, "b");
  fail("Order_offset_before_overflow_same_tensor", st_file(obj1("t", entry("F32", "2,18446744073709551614", 4, 8)), 8), K::InvalidOffset, "t");
  fail("Order_overflow_before_misaligned", st_file(obj1("t", entry("F4", "3,9223372036854775807", 0, 1)), 1), K::ValidationOverflow, "t");
  // Schema errors anywhere beat validation errors.
  json_fail("Order_schema_beats_offsets", "{\"a\":" + entry("F32", "1", 4, 8) + ",\"b\":" + entry("F99", "1", 0, 4) + "}",
            K::InvalidHeaderDeserialization, 8);

  // ---- §1.2 step 9: the data must end exactly at the end of the file --------------------------------
  fail("Incomplete_trailing_byte", st_file(valid_json(), 9), K::MetadataIncompleteBuffer);
  fail("Incomplete_trailing_polyglot", st_file(valid_json(), 8) + "PK\x05\x06" + std::string(18, '\0'), K::MetadataIncompleteBuffer);
  fail("Incomplete_missing_2_bytes", st_file(valid_json(), 6), K::MetadataIncompleteBuffer);
  fail("Incomplete_no_data_at_all", st_file(valid_json(), 0), K::MetadataIncompleteBuffer);
  fail("Incomplete_zero_tensors_with_data", st_file("{}", 1), K::MetadataIncompleteBuffer);
  fail("Incomplete_metadata_only_with_data", st_file("{\"__metadata__\":{\"a\":\"b\"}}", 3), K::MetadataIncompleteBuffer);
  fail("Order_invalid_info_before_incomplete", st_file(obj1("t", entry("I32", "2,2", 0, 4)), 5), K::TensorInvalidInfo, "t");

  // ---- unknown fields (ignored by the reference) ---------------------------------------------------
  json_ok("Unknown_field_accepted", obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}"), 8);
  json_ok("Unknown_field_first", obj1("t", "{\"x\":{\"y\":[1,2,{}]},\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"), 8);
  v.push_back({"Unknown_field_strict", st_file(obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}"), 8), K::UnknownField,
               true, "t"});
  v.push_back({"Unknown_field_strict_reference_error_first",
               st_file(obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12],\"extra\":1}"), 12), K::InvalidOffset, true, "t"});
  v.push_back({"Unknown_field_strict_valid_file_ok", st_file(valid_json(), 8), std::nullopt, true});
  v.push_back({"Unknown_field_strict_metadata_is_fine", st_file("{\"__metadata__\":{\"x\":\"y\"},\"t\":" + entry("F32", "2", 0, 8) + "}", 8),
               std::nullopt, true});
  json_fail("Unknown_field_invalid_json_inside", obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":[1,]}"),
            K::InvalidHeaderDeserialization, 8);
  json_fail("Unknown_field_lone_surrogate_inside", obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":\"\\udfff\"}"),
            K::InvalidHeaderDeserialization, 8);
  json_fail("Unknown_field_bad_number_inside", obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":01}"),
            K::InvalidHeaderDeserialization, 8);

  // ---- our stricter rules: only after every reference rule passes ----------------------------------
  json_fail("Strict_duplicate_tensor_last_wins_valid", "{\"a\":" + entry("F32", "1", 0, 4) + ",\"a\":" + entry("F32", "1", 0, 4) + "}",
            K::DuplicateKey, 4);
  json_fail("Strict_duplicate_tensor_last_wins_valid_different_dtype",
            "{\"a\":" + entry("F32", "1", 0, 4) + ",\"a\":" + entry("I32", "1", 0, 4) + "}", K::DuplicateKey, 4);
  // Last wins leaves a at [4,8]: a hole at 0, the reference's InvalidOffset (issue #401).
  fail("Strict_duplicate_tensor_last_wins_hole", st_file("{\"a\":" + entry("F32", "1", 0, 4) + ",\"a\":" + entry("F32", "1", 4, 8) + "}", 8),
       K::InvalidOffset, "a");
  // First wins would be valid here; last wins is [0,8] over 4 bytes of data.
  json_fail("Strict_duplicate_tensor_last_wins_incomplete", "{\"a\":" + entry("F32", "1", 0, 4) + ",\"a\":" + entry("F32", "2", 0, 8) + "}",
            K::MetadataIncompleteBuffer, 4);
  // Every duplicate is deserialized by the reference, so a bad earlier entry is a schema error.
  json_fail("Strict_duplicate_tensor_bad_first_entry", "{\"a\":" + entry("X32", "1", 0, 4) + ",\"a\":" + entry("F32", "1", 0, 4) + "}",
            K::InvalidHeaderDeserialization, 4);
  json_fail("Strict_duplicate_tensor_by_escape", "{\"a\":" + entry("F32", "1", 0, 4) + ",\"\\u0061\":" + entry("F32", "1", 0, 4) + "}",
            K::DuplicateKey, 4);
  json_fail("Strict_duplicate_metadata_key", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", K::DuplicateKey);
  json_fail("Strict_duplicate_metadata_key_by_escape", "{\"__metadata__\":{\"k\":\"1\",\"\\u006b\":\"2\"}}", K::DuplicateKey);
  json_fail("Strict_duplicate_metadata_key_non_string", "{\"__metadata__\":{\"k\":\"1\",\"k\":2}}", K::InvalidHeaderDeserialization);
  json_fail("Strict_duplicate_metadata_key_and_incomplete", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", K::MetadataIncompleteBuffer, 1);
  json_fail("Strict_duplicate_unknown_field", obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1,\"x\":2}"), K::DuplicateKey,
            8);
  json_fail("Strict_duplicate_key_nested_in_unknown_field",
            obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":{\"y\":1,\"y\":1}}"), K::DuplicateKey, 8);
  json_fail("Strict_array_form_entry", obj1("t", "[\"F32\",[2],[0,8]]"), K::NonCanonicalEntry, 8);
  json_fail("Strict_array_form_entry_with_hole", obj1("t", "[\"F32\",[1],[4,8]]"), K::InvalidOffset, 8);
  json_fail("Strict_array_form_entry_invalid_info", obj1("t", "[\"F32\",[2],[0,4]]"), K::TensorInvalidInfo, 4);
  json_fail("Strict_array_form_entry_too_short", obj1("t", "[\"F32\",[2]]"), K::InvalidHeaderDeserialization, 8);
  json_fail("Strict_array_form_entry_too_long", obj1("t", "[\"F32\",[2],[0,8],1]"), K::InvalidHeaderDeserialization, 8);
  json_fail("Strict_array_form_entry_bad_dtype", obj1("t", "[\"F31\",[2],[0,8]]"), K::InvalidHeaderDeserialization, 8);
  json_fail("Strict_array_form_empty", obj1("t", "[]"), K::InvalidHeaderDeserialization);
  json_fail("Strict_object_form_dtype", obj1("t", "{\"dtype\":{\"F32\":null},\"shape\":[2],\"data_offsets\":[0,8]}"), K::NonCanonicalEntry, 8);
  json_fail("Strict_object_form_dtype_invalid_info", obj1("t", "{\"dtype\":{\"F32\":null},\"shape\":[2],\"data_offsets\":[0,4]}"),
            K::TensorInvalidInfo, 4);
  json_fail("Strict_object_form_dtype_incomplete", obj1("t", "{\"dtype\":{\"F32\":null},\"shape\":[2],\"data_offsets\":[0,8]}"),
            K::MetadataIncompleteBuffer, 9);
  return v;
}

void PrintTo(const RuleCase& c, std::ostream* os) { *os << c.name << ": " << hexdump(c.bytes, 120); }

class HeaderRule : public ::testing::TestWithParam<RuleCase> {};

TEST_P(HeaderRule, ExactKind) {
  const RuleCase& c = GetParam();
  ReadOptions opt;
  opt.reject_unknown_fields = c.strict;
  auto src = mem(c.bytes, "dir/rule.safetensors");
  auto r = Header::parse(*src, opt);
  if (!c.expect) {
    EXPECT_TRUE(IsOk(r)) << "input: " << hexdump(c.bytes, 400);
    return;
  }
  ASSERT_TRUE(IsKind(r, *c.expect)) << "input: " << hexdump(c.bytes, 400);
  EXPECT_EQ(r.error().context().file, "dir/rule.safetensors") << describe(r.error());
  if (!c.tensor.empty()) {
    EXPECT_EQ(r.error().context().tensor, c.tensor) << describe(r.error());
  }
  // The same bytes behind a differently named source.
  auto r2 = Header::parse(*mem(c.bytes, "other"), opt);
  ASSERT_FALSE(r2.is_ok());
  EXPECT_EQ(r2.error().context().file, "other");
}

INSTANTIATE_TEST_SUITE_P(Reference, HeaderRule, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<RuleCase>& info) { return info.param.name; });

// ---- tests that inspect the parsed header ----------------------------------------------------------

TEST(HeaderParse, MetadataNullIsAbsent) {
  auto r = parse(st_file("{\"__metadata__\":null}"));
  ASSERT_TRUE(IsOk(r));
  EXPECT_FALSE(r->has_metadata());
  EXPECT_TRUE(r->metadata().empty());
}

TEST(HeaderParse, MetadataEmptyObjectIsPresent) {
  auto r = parse(st_file("{\"__metadata__\":{}}"));
  ASSERT_TRUE(IsOk(r));
  EXPECT_TRUE(r->has_metadata());
  EXPECT_TRUE(r->metadata().empty());
  EXPECT_FALSE(r->metadata_value("x").has_value());
}

TEST(HeaderParse, NoMetadata) {
  auto r = parse(st_file("{}"));
  ASSERT_TRUE(IsOk(r));
  EXPECT_FALSE(r->has_metadata());
  EXPECT_EQ(r->tensors().size(), 0u);
  EXPECT_EQ(r->header_size(), 2u);
  EXPECT_EQ(r->data_start(), 10u);
  EXPECT_EQ(r->data_size(), 0u);
  EXPECT_EQ(r->file_size(), 10u);
}

TEST(HeaderParse, MetadataValuesInFileOrderAndUnescaped) {
  auto r = parse(st_file("{\"t\":" + entry("U8", "1", 0, 1) +
                             ",\"__metadata__\":{\"z\":\"1\",\"a\":\"x\\\"y\\\\z\\n\\u00e9\\ud83d\\ude00\",\"\":\"\",\"m\":\"\\u0000\"}}",
                         1));
  ASSERT_TRUE(IsOk(r));
  ASSERT_TRUE(r->has_metadata());
  const auto& md = r->metadata();
  ASSERT_EQ(md.size(), 4u);
  EXPECT_EQ(md[0].first, "z");
  EXPECT_EQ(md[0].second, "1");
  EXPECT_EQ(md[1].first, "a");
  EXPECT_EQ(md[1].second, "x\"y\\z\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(md[2].first, "");
  EXPECT_EQ(md[2].second, "");
  EXPECT_EQ(md[3].first, "m");
  EXPECT_EQ(md[3].second, std::string(1, '\0'));
  EXPECT_EQ(r->metadata_value("z"), std::optional<std::string_view>("1"));
  EXPECT_EQ(r->metadata_value(""), std::optional<std::string_view>(""));
  EXPECT_FALSE(r->metadata_value("y").has_value());
}

TEST(HeaderParse, MetadataKeyWrittenWithEscapeIsMetadata) {
  auto r = parse(st_file("{\"\\u005f_metadata__\":{\"k\":\"v\"}}"));
  ASSERT_TRUE(IsOk(r));
  EXPECT_TRUE(r->has_metadata());
  EXPECT_EQ(r->metadata_value("k"), std::optional<std::string_view>("v"));
  EXPECT_EQ(r->tensors().size(), 0u);
}

TEST(HeaderParse, TensorsInOffsetOrderWithInfo) {
  // JSON order c, a, b, z; offset order z(0,0) a(0,8) b(8,10) c(10,10).
  const std::string j = "{\"c\":" + entry("I8", "0", 10, 10) + ",\"a\":" + entry("F32", "2", 0, 8) + ",\"b\":" + entry("BF16", "", 8, 10) +
                        ",\"z\":" + entry("F64", "3,0,2", 0, 0) + "}";
  auto r = parse(st_file(j, 10));
  ASSERT_TRUE(IsOk(r));
  const auto ts = r->tensors();
  ASSERT_EQ(ts.size(), 4u);
  // z and a both begin at 0; z ends first.
  EXPECT_EQ(ts[0].name, "z");
  EXPECT_EQ(ts[1].name, "a");
  EXPECT_EQ(ts[2].name, "b");
  EXPECT_EQ(ts[3].name, "c");
  EXPECT_EQ(ts[1].dtype, TensorType::F32);
  EXPECT_EQ(std::vector<std::uint64_t>(ts[1].shape.begin(), ts[1].shape.end()), std::vector<std::uint64_t>{2});
  EXPECT_EQ(ts[1].begin, 0u);
  EXPECT_EQ(ts[1].end, 8u);
  EXPECT_EQ(ts[1].nbytes(), 8u);
  EXPECT_EQ(ts[1].num_elements(), 2u);
  EXPECT_EQ(ts[2].dtype, TensorType::BF16);
  EXPECT_TRUE(ts[2].shape.empty());
  EXPECT_EQ(ts[2].num_elements(), 1u);
  EXPECT_EQ(ts[0].num_elements(), 0u);
  EXPECT_EQ(std::vector<std::uint64_t>(ts[0].shape.begin(), ts[0].shape.end()), (std::vector<std::uint64_t>{3, 0, 2}));
  for (const char* n : {"a", "b", "c", "z"}) {
    const auto* info = r->find(n);
    ASSERT_NE(info, nullptr) << n;
    EXPECT_EQ(info->name, n);
  }
  EXPECT_EQ(r->find("d"), nullptr);
  EXPECT_EQ(r->find(""), nullptr);
  EXPECT_EQ(r->find("a "), nullptr);
  EXPECT_EQ(r->header_size(), j.size());
  EXPECT_EQ(r->data_size(), 10u);
  EXPECT_EQ(r->data_start(), 8u + j.size());
}

TEST(HeaderParse, NamesWithNulAndEscapes) {
  const std::string j = "{\"a\\u0000b\":" + entry("U8", "1", 0, 1) + ",\"\\ud83d\\ude00\":" + entry("U8", "1", 1, 2) +
                        ",\"q\\\"\\\\\\/\":" + entry("U8", "1", 2, 3) + ",\"\":" + entry("U8", "1", 3, 4) + "}";
  auto r = parse(st_file(j, 4));
  ASSERT_TRUE(IsOk(r));
  ASSERT_EQ(r->tensors().size(), 4u);
  EXPECT_EQ(r->tensors()[0].name, std::string_view("a\0b", 3));
  EXPECT_NE(r->find(std::string_view("a\0b", 3)), nullptr);
  EXPECT_EQ(r->find("a"), nullptr);
  EXPECT_NE(r->find("\xf0\x9f\x98\x80"), nullptr);
  EXPECT_NE(r->find("q\"\\/"), nullptr);
  const auto* empty = r->find("");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->begin, 3u);
}

TEST(HeaderParse, LongName) {
  const std::string name(100000, 'n');
  auto r = parse(st_file(obj1(name, entry("U8", "1", 0, 1)), 1));
  ASSERT_TRUE(IsOk(r));
  ASSERT_NE(r->find(name), nullptr);
  EXPECT_EQ(r->tensors()[0].name.size(), name.size());
}

TEST(HeaderParse, EscapedDtypeAndFieldNames) {
  auto r = parse(st_file(obj1("t", "{\"\\u0064type\":\"\\u0042F16\",\"shape\":[2],\"data_offsets\":[0,4]}"), 4));
  ASSERT_TRUE(IsOk(r));
  EXPECT_EQ(r->tensors()[0].dtype, TensorType::BF16);
}

TEST(HeaderParse, ManyTensorsLookup) {
  // Enough tensors to exercise the hash index (collisions, growth).
  std::string j = "{";
  const int n = 2000;
  for (int k = 0; k < n; ++k) {
    if (k) j += ",";
    j += "\"layer." + std::to_string(k) + ".w\":" + entry("U8", "1", static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(k + 1));
  }
  j += "}";
  auto r = parse(st_file(j, n));
  ASSERT_TRUE(IsOk(r));
  ASSERT_EQ(r->tensors().size(), static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    const auto* info = r->find("layer." + std::to_string(k) + ".w");
    ASSERT_NE(info, nullptr) << k;
    EXPECT_EQ(info->begin, static_cast<std::uint64_t>(k));
  }
  EXPECT_EQ(r->find("layer.2000.w"), nullptr);
  EXPECT_EQ(r->find("layer.1.w "), nullptr);
}

TEST(HeaderParse, CopyOfHeaderOutlivesSourceBytes) {
  // Names and shapes must be owned by the Header, not point into the source.
  std::optional<Header> h;
  {
    auto src = mem(st_file(obj1("weight", entry("F32", "1,2", 0, 8)), 8));
    auto r = Header::parse(*src);
    ASSERT_TRUE(IsOk(r));
    h.emplace(std::move(r).value());
  }
  ASSERT_EQ(h->tensors().size(), 1u);
  EXPECT_EQ(h->tensors()[0].name, "weight");
  EXPECT_EQ(h->tensors()[0].shape.size(), 2u);
  EXPECT_EQ(h->tensors()[0].shape[1], 2u);
  Header moved = std::move(*h);
  EXPECT_NE(moved.find("weight"), nullptr);
}

// ---- JSON nesting depth (serde_json: recursion limit 128) ------------------------------------------
//
// serde_json decrements remaining_depth (starting at 128) when it enters an array or object and fails
// when it reaches 0, so at most 127 containers may be open at once. The header object and the tensor
// entry are two of them: an unknown field may hold at most 125 nested arrays.

std::string nested_unknown(int arrays) {
  return obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":" + std::string(static_cast<std::size_t>(arrays), '[') +
                       std::string(static_cast<std::size_t>(arrays), ']') + "}");
}

TEST(JsonDepth, ConstantMirrorsSerde) { EXPECT_EQ(kMaxJsonDepth, 128); }

TEST(JsonDepth, ShallowNestingInUnknownFieldAccepted) {
  EXPECT_TRUE(ParseOk(st_file(nested_unknown(1), 8)));
  EXPECT_TRUE(ParseOk(st_file(nested_unknown(64), 8)));
  EXPECT_TRUE(ParseOk(st_file(nested_unknown(100), 8)));
}

TEST(JsonDepth, ExactSerdeBoundary) {
  // 2 + 125 = 127 open containers: accepted; 128: RecursionLimitExceeded.
  EXPECT_TRUE(ParseOk(st_file(nested_unknown(kMaxJsonDepth - 3), 8)));
  EXPECT_TRUE(ParseFails(st_file(nested_unknown(kMaxJsonDepth - 2), 8), K::InvalidHeaderDeserialization));
  EXPECT_TRUE(ParseFails(st_file(nested_unknown(kMaxJsonDepth - 1), 8), K::InvalidHeaderDeserialization));
}

TEST(JsonDepth, DeepNestingRejected) {
  EXPECT_TRUE(ParseFails(st_file(nested_unknown(200), 8), K::InvalidHeaderDeserialization));
  EXPECT_TRUE(ParseFails(st_file(nested_unknown(5000), 8), K::InvalidHeaderDeserialization));
  // Objects count like arrays.
  std::string objs;
  for (int k = 0; k < 200; ++k) objs += "{\"a\":";
  objs += "1";
  for (int k = 0; k < 200; ++k) objs += "}";
  EXPECT_TRUE(ParseFails(st_file(obj1("t", "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":" + objs + "}"), 8),
                         K::InvalidHeaderDeserialization));
}

TEST(JsonDepth, DeepNestingIsRejectedBeforeUnknownFieldCheck) {
  ReadOptions strict;
  strict.reject_unknown_fields = true;
  EXPECT_TRUE(ParseFails(st_file(nested_unknown(200), 8), K::InvalidHeaderDeserialization, strict));
  EXPECT_TRUE(ParseFails(st_file(nested_unknown(10), 8), K::UnknownField, strict));
}

TEST(JsonDepth, UnclosedDeepNestingIsRejected) {
  // Unbalanced deep input must fail cleanly (no stack exhaustion).
  EXPECT_TRUE(ParseFails(st_file(std::string(100000, '[')), K::InvalidHeaderDeserialization));
  EXPECT_TRUE(ParseFails(st_file("{\"t\":" + std::string(100000, '{')), K::InvalidHeaderDeserialization));
}

// ---- error context ---------------------------------------------------------------------------------

TEST(HeaderErrors, ToStringMentionsFileKindAndTensor) {
  auto r = parse(st_file("{\"a\":" + entry("F32", "1", 0, 4) + ",\"weird\":" + entry("F32", "1", 8, 12) + "}", 12), {}, "model.safetensors");
  ASSERT_TRUE(IsKind(r, K::InvalidOffset));
  EXPECT_EQ(r.error().context().tensor, "weird");
  const std::string s = r.error().to_string();
  EXPECT_NE(s.find("model.safetensors"), std::string::npos) << s;
  EXPECT_NE(s.find("InvalidOffset"), std::string::npos) << s;
  EXPECT_NE(s.find("weird"), std::string::npos) << s;
}

TEST(HeaderErrors, DuplicateTensorNameIsInContext) {
  auto r = parse(st_file("{\"dup\":" + entry("F32", "1", 0, 4) + ",\"dup\":" + entry("F32", "1", 0, 4) + "}", 4));
  ASSERT_TRUE(IsKind(r, K::DuplicateKey));
  EXPECT_EQ(r.error().context().tensor, "dup");
}

TEST(HeaderErrors, UnknownFieldNamesTheTensor) {
  ReadOptions strict;
  strict.reject_unknown_fields = true;
  auto r = parse(
      st_file("{\"ok\":" + entry("F32", "1", 0, 4) + ",\"bad\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8],\"note\":\"x\"}}", 8), strict);
  ASSERT_TRUE(IsKind(r, K::UnknownField));
  EXPECT_EQ(r.error().context().tensor, "bad");
}

}  // namespace
