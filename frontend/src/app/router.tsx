import { createBrowserRouter } from "react-router";
import { AppLayout } from "./layout";
import { AdminPage } from "./routes/admin";
import { ComparePage } from "./routes/compare";
import { DashboardPage } from "./routes/dashboard";
import { LoginPage } from "./routes/login";
import { NewStudyPage, EditStudyPage } from "./routes/new-study";
import { NotFoundPage, RouteError } from "./routes/not-found";
import { RunPage } from "./routes/run";
import { RunsPage } from "./routes/runs";
import { NotificationSettingsPage } from "./routes/settings-notifications";
import { StudiesPage } from "./routes/studies";
import { StudyPage } from "./routes/study";
import { TokensPage } from "./routes/tokens";

export const routes = [
  { path: "/login", element: <LoginPage />, errorElement: <RouteError /> },
  {
    element: <AppLayout />,
    errorElement: <RouteError />,
    children: [
      { path: "/", element: <DashboardPage /> },
      { path: "/studies", element: <StudiesPage /> },
      { path: "/studies/new", element: <NewStudyPage /> },
      { path: "/studies/:id", element: <StudyPage /> },
      { path: "/studies/:id/edit", element: <EditStudyPage /> },
      { path: "/runs", element: <RunsPage /> },
      { path: "/runs/:id", element: <RunPage /> },
      { path: "/compare", element: <ComparePage /> },
      { path: "/settings/tokens", element: <TokensPage /> },
      { path: "/settings/notifications", element: <NotificationSettingsPage /> },
      { path: "/operations", element: <AdminPage /> },
      { path: "/operations/:tab", element: <AdminPage /> },
      { path: "*", element: <NotFoundPage /> },
    ],
  },
];

export function makeRouter() {
  return createBrowserRouter(routes);
}
