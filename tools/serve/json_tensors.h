// Tensors in TF Serving's JSON: nested lists of numbers, booleans or strings (binary strings as
// {"b64": "..."}), one list level per dimension. Requests are parsed by simdjson (a predict body
// of one Fashion-MNIST image took nlohmann::json 90 us, longer than the prediction; simdjson
// takes a few), answers are written with nlohmann::json; this file maps their values onto
// tensors and back, checking what the signature declares.
//
//   simdjson::dom::parser parser;
//   simdjson::dom::element body = parser.parse(text);                 // (error handling: .get)
//   auto t = tensor_from_json(body["inputs"], DType::kFloat32, "x");  // Result<Tensor>
//   auto s = tensor_from_rows({row0, row1}, DType::kFloat32, "x");    // stacked: [2, ...]
//   json v = json_from_tensor(t, "probabilities");                   // the whole tensor
//   json r = json_row(t, 3, "probabilities");                         // row 3 (dimension 0)
//   auto bytes = example_from_json(example, &context);  // a serialized tf.Example (:classify)
//
// A ragged list, a value of another type ("x": a string where float32 is declared) or an integer
// out of the dtype's range is InvalidArgument naming the input. Outputs whose names end in
// "_bytes" are written as {"b64": ...}, as TF Serving does.
#pragma once

#include <simdjson.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/status.h"
#include "runtime/tensor.h"

namespace troupe::serve {

using nlohmann::json;

runtime::Result<runtime::Tensor> tensor_from_json(simdjson::dom::element value,
                                                  runtime::DType dtype, const std::string& name);
// The values of `rows` (one per example) stacked along a new dimension 0.
runtime::Result<runtime::Tensor> tensor_from_rows(const std::vector<simdjson::dom::element>& rows,
                                                  runtime::DType dtype, const std::string& name);
json json_from_tensor(const runtime::Tensor& t, const std::string& name);
// The text of an answer. Bytes that are not UTF-8 (a path or a string tensor a client sent,
// echoed back) become U+FFFD instead of an exception: nothing a client sends may end the server.
std::string to_text(const json& value);
json json_row(const runtime::Tensor& t, int64_t row, const std::string& name);
// One element of a float tensor as JSON: the shortest decimal that reads back as the same float
// (0.1f is written 0.1, not 0.10000000149011612).
json json_float(float v);
// One example of a :classify or :regress request (with the request's context, whose features
// every example shares) as a serialized tf.Example, as TF Serving builds it: strings and
// {"b64": ...} as a BytesList, integers as an Int64List, other numbers as a FloatList; a
// scalar is a list of one value. An example's own feature wins over the context's (TF Serving
// merges the context's proto first). A feature of mixed kinds is InvalidArgument naming it.
runtime::Result<std::string> example_from_json(simdjson::dom::object features,
                                               const simdjson::dom::object* context);

}  // namespace troupe::serve
