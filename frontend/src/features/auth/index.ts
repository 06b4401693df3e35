export { LoginForm } from "./components/login-form";
export { useLogin, useLogout, useMe } from "./hooks/use-session";
export { meQueryKey } from "./api/auth";
