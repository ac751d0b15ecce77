#include "estimators/selection/pipeline.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>

#include "estimators/canned/params.h"
#include "estimators/metrics.h"

namespace troupe::estimators {

using runtime::Result;
using runtime::Status;
using runtime::Tensor;

namespace {

// x as a matrix of doubles [n, d]; d is every dimension after the first.
Result<Eigen::MatrixXd> matrix_of(const Tensor& x, const std::string& who) {
  if (x.rank() < 1 || x.dtype() == runtime::DType::kString) {
    return runtime::invalid_argument(who, ": x must be numbers with examples along dimension 0");
  }
  const int64_t n = x.dim(0);
  const int64_t d = n > 0 ? x.num_elements() / n : 0;
  const std::vector<double> v = as_doubles(x);
  Eigen::MatrixXd m(n, d);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) m(i, j) = v[i * d + j];
  }
  return m;
}

Tensor tensor_of(const Eigen::MatrixXd& m) {
  Tensor t(runtime::DType::kFloat32, runtime::Shape{m.rows(), m.cols()});
  float* p = t.data<float>();
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    for (Eigen::Index j = 0; j < m.cols(); ++j) p[i * m.cols() + j] = static_cast<float>(m(i, j));
  }
  return t;
}

Status check_width(const Eigen::MatrixXd& m, size_t fitted, const std::string& who) {
  if (fitted == 0) return runtime::failed_precondition(who, ": transform before fit");
  if (static_cast<size_t>(m.cols()) != fitted) {
    return runtime::invalid_argument(who, ": x has ", m.cols(), " columns; it was fitted on ",
                                     fitted);
  }
  return runtime::ok_status();
}

}  // namespace

Status StandardScaler::fit(const Tensor& x) {
  TROUPE_ASSIGN_OR_RETURN(Eigen::MatrixXd m, matrix_of(x, name()));
  if (m.rows() == 0) return runtime::invalid_argument(name(), ".fit: no examples");
  const Eigen::VectorXd mean = m.colwise().mean();
  mean_.assign(mean.data(), mean.data() + mean.size());
  scale_.assign(mean_.size(), 1.0);
  for (Eigen::Index j = 0; j < m.cols(); ++j) {
    // The population standard deviation (ddof 0), as scikit-learn's.
    const double sd = std::sqrt((m.col(j).array() - mean(j)).square().mean());
    if (sd > 0) scale_[j] = sd;
  }
  return runtime::ok_status();
}

Result<Tensor> StandardScaler::transform(const Tensor& x) const {
  TROUPE_ASSIGN_OR_RETURN(Eigen::MatrixXd m, matrix_of(x, name()));
  TROUPE_RETURN_IF_ERROR(check_width(m, mean_.size(), name()));
  for (Eigen::Index j = 0; j < m.cols(); ++j) {
    if (options_.with_mean) m.col(j).array() -= mean_[j];
    if (options_.with_std) m.col(j).array() /= scale_[j];
  }
  return tensor_of(m);
}

ParamMap StandardScaler::get_params() const { return params_of(options_, Task::kRegressor); }
Status StandardScaler::set_params(const ParamMap& p) {
  return assign_params(options_, Task::kRegressor, p, name());
}
std::unique_ptr<Transformer> StandardScaler::clone() const {
  return std::make_unique<StandardScaler>(options_);
}

Status PCAOptions::validate(Task) const {
  if (n_components < 1) {
    return param_error("PCA", "n_components", std::to_string(n_components) + " is below 1");
  }
  return runtime::ok_status();
}

Status PCA::fit(const Tensor& x) {
  TROUPE_ASSIGN_OR_RETURN(Eigen::MatrixXd m, matrix_of(x, name()));
  if (options_.n_components > std::min<int64_t>(m.rows(), m.cols())) {
    return runtime::invalid_argument(
        "PCA: n_components ", options_.n_components,
        " is more than min(examples, columns) = ", std::min<int64_t>(m.rows(), m.cols()));
  }
  const Eigen::VectorXd mean = m.colwise().mean();
  m.rowwise() -= mean.transpose();
  // The covariance with n - 1, as scikit-learn's explained_variance_.
  const Eigen::MatrixXd cov = m.transpose() * m / std::max<double>(1.0, m.rows() - 1.0);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(cov);
  if (eig.info() != Eigen::Success) return runtime::internal_error("PCA: no eigendecomposition");
  mean_.assign(mean.data(), mean.data() + mean.size());
  components_.clear();
  variance_.clear();
  const Eigen::Index d = m.cols();
  for (int64_t k = 0; k < options_.n_components; ++k) {
    // Eigen sorts eigenvalues ascending: the largest are last.
    Eigen::VectorXd v = eig.eigenvectors().col(d - 1 - k);
    Eigen::Index top = 0;
    v.cwiseAbs().maxCoeff(&top);
    if (v(top) < 0) v = -v;
    components_.emplace_back(v.data(), v.data() + v.size());
    variance_.push_back(std::max(0.0, eig.eigenvalues()(d - 1 - k)));
  }
  return runtime::ok_status();
}

Result<Tensor> PCA::transform(const Tensor& x) const {
  TROUPE_ASSIGN_OR_RETURN(Eigen::MatrixXd m, matrix_of(x, name()));
  TROUPE_RETURN_IF_ERROR(check_width(m, mean_.size(), name()));
  Eigen::MatrixXd w(m.cols(), components_.size());
  for (size_t k = 0; k < components_.size(); ++k) {
    for (Eigen::Index j = 0; j < m.cols(); ++j) {
      w(j, static_cast<Eigen::Index>(k)) =
          components_[k][j] / (options_.whiten && variance_[k] > 0 ? std::sqrt(variance_[k]) : 1);
    }
  }
  for (Eigen::Index j = 0; j < m.cols(); ++j) m.col(j).array() -= mean_[j];
  return tensor_of(m * w);
}

ParamMap PCA::get_params() const { return params_of(options_, Task::kRegressor); }
Status PCA::set_params(const ParamMap& p) {
  return assign_params(options_, Task::kRegressor, p, name());
}
std::unique_ptr<Transformer> PCA::clone() const { return std::make_unique<PCA>(options_); }

Pipeline& Pipeline::add(std::string name, std::unique_ptr<Transformer> step) {
  steps_.emplace_back(std::move(name), std::move(step));
  return *this;
}

Pipeline& Pipeline::set_model(std::string name, std::unique_ptr<Model> model) {
  model_name_ = std::move(name);
  model_ = std::move(model);
  return *this;
}

Status Pipeline::fit(const Tensor& x, const Tensor& y) {
  if (!model_) return runtime::failed_precondition("Pipeline: no model (set_model)");
  Tensor current = x;
  for (auto& [name, step] : steps_) {
    if (Status s = step->fit(current); !s.ok()) return s.with_context("step " + name);
    auto next = step->transform(current);
    if (!next.ok()) return next.status().with_context("step " + name);
    current = *next;
  }
  return model_->fit(current, y);
}

Result<Tensor> Pipeline::transform(const Tensor& x) const {
  Tensor current = x;
  for (const auto& [name, step] : steps_) {
    auto next = step->transform(current);
    if (!next.ok()) return next.status().with_context("step " + name);
    current = *next;
  }
  return current;
}

Result<Tensor> Pipeline::predict(const Tensor& x) {
  if (!model_) return runtime::failed_precondition("Pipeline: no model (set_model)");
  TROUPE_ASSIGN_OR_RETURN(Tensor t, transform(x));
  return model_->predict(t);
}

Result<double> Pipeline::score(const Tensor& x, const Tensor& y) {
  if (!model_) return runtime::failed_precondition("Pipeline: no model (set_model)");
  TROUPE_ASSIGN_OR_RETURN(Tensor t, transform(x));
  return model_->score(t, y);
}

ParamMap Pipeline::get_params() const {
  ParamMap all;
  for (const auto& [name, step] : steps_) {
    for (const auto& [k, v] : step->get_params()) all[name + "__" + k] = v;
  }
  if (model_) {
    for (const auto& [k, v] : model_->get_params()) all[model_name_ + "__" + k] = v;
  }
  return all;
}

Status Pipeline::set_params(const ParamMap& params) {
  // Checked on clones first, so that a bad name or value changes nothing.
  std::unique_ptr<Model> next = clone();
  auto& p = static_cast<Pipeline&>(*next);
  for (const auto& [key, value] : params) {
    const size_t cut = key.find("__");
    if (cut == std::string::npos) {
      return runtime::invalid_argument("Pipeline parameter '", key, "' is not step__param");
    }
    const std::string step = key.substr(0, cut), param = key.substr(cut + 2);
    Status s = runtime::invalid_argument("Pipeline has no step '", step, "'");
    if (p.model_ && step == p.model_name_) s = p.model_->set_params({{param, value}});
    for (auto& [name, t] : p.steps_) {
      if (name == step) s = t->set_params({{param, value}});
    }
    TROUPE_RETURN_IF_ERROR(s);
  }
  for (const auto& [key, value] : params) {
    const size_t cut = key.find("__");
    const std::string step = key.substr(0, cut), param = key.substr(cut + 2);
    if (model_ && step == model_name_) TROUPE_RETURN_IF_ERROR(model_->set_params({{param, value}}));
    for (auto& [name, t] : steps_) {
      if (name == step) TROUPE_RETURN_IF_ERROR(t->set_params({{param, value}}));
    }
  }
  return runtime::ok_status();
}

std::unique_ptr<Model> Pipeline::clone() const {
  auto p = std::make_unique<Pipeline>();
  for (const auto& [name, step] : steps_) p->add(name, step->clone());
  if (model_) p->set_model(model_name_, model_->clone());
  return p;
}

}  // namespace troupe::estimators
