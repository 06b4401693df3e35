import { Alert, Button, PasswordInput, Stack, TextInput } from "@mantine/core";
import { IconAlertTriangle } from "@/components/icons";
import { useState, type FormEvent } from "react";
import { ApiError, errorMessage } from "@/lib/api-client";
import { useLogin } from "../hooks/use-session";

export function LoginForm({ onSignedIn }: { onSignedIn: () => void }) {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [touched, setTouched] = useState(false);
  const loginMutation = useLogin();
  const error = loginMutation.error;
  const field = error instanceof ApiError ? error.field : null;

  const submit = (e: FormEvent) => {
    e.preventDefault();
    setTouched(true);
    if (!username || !password) return;
    loginMutation.mutate({ username, password }, { onSuccess: onSignedIn });
  };

  return (
    <form onSubmit={submit} noValidate aria-label="Sign in">
      <Stack gap="md">
        {error && (
          <Alert
            color="red"
            variant="light"
            icon={<IconAlertTriangle size={18} />}
            role="alert"
            title={
              error instanceof ApiError && error.status === 401
                ? "Sign-in failed"
                : "Could not sign in"
            }
          >
            {error instanceof ApiError && error.status === 401
              ? "Wrong username or password. Check both and try again."
              : errorMessage(error)}
          </Alert>
        )}
        <TextInput
          label="Username"
          name="username"
          autoComplete="username"
          autoFocus
          value={username}
          onChange={(e) => setUsername(e.currentTarget.value)}
          error={
            (touched && !username && "Enter your username") ||
            (field === "username" && errorMessage(error))
          }
        />
        <PasswordInput
          label="Password"
          name="password"
          autoComplete="current-password"
          value={password}
          onChange={(e) => setPassword(e.currentTarget.value)}
          error={
            (touched && !password && "Enter your password") ||
            (field === "password" && errorMessage(error))
          }
        />
        <Button type="submit" loading={loginMutation.isPending} fullWidth>
          Sign in
        </Button>
      </Stack>
    </form>
  );
}
