// View helpers: elements from plain calls (no framework), the viewer's time zone and the
// money's currency in every figure, API errors in words beside what caused them, a loading
// state shown when an answer takes longer than 200 ms, and lists that load page by page.
import { MarketplaceError } from "@marketplace/client";

type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, string | number | boolean | null | undefined | ((e: Event) => void)>;

/** An element: h("a", { href: "/portal/" }, "Home"). on* attributes are listeners; false and
 * null attributes are left out. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === "function") el.addEventListener(name.slice(2).toLowerCase(), value);
    else if (name === "class") el.className = String(value);
    else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  append(el, children);
  return el;
}

export function append(el: Element, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(typeof c === "string" || typeof c === "number" ? String(c) : c);
  }
}

/** Replaces the element's children. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

const CURRENCY = "USD"; // the marketplace charges in US dollars (the processor's currency)

export function money(amount: number | null | undefined): string {
  if (amount === null || amount === undefined) return "—";
  return new Intl.NumberFormat(undefined, { style: "currency", currency: CURRENCY }).format(amount);
}

/** A time in the viewer's time zone, as a <time> element. */
export function when(iso: string | null | undefined): Node {
  if (!iso) return document.createTextNode("—");
  const d = new Date(iso);
  return h("time", { datetime: iso }, new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" }).format(d));
}

export function month(ym: string): string {
  const [y, m] = ym.split("-").map(Number);
  if (!y || !m) return ym;
  return new Intl.DateTimeFormat(undefined, { month: "short", year: "numeric", timeZone: "UTC" }).format(Date.UTC(y, m - 1, 1));
}

/** What an error says to a person. */
/** An error whose message is for the viewer as it is. */
export class Notice extends Error {}

export function errorText(e: unknown): string {
  if (e instanceof MarketplaceError) return e.error;
  if (e instanceof Notice) return e.message;
  if (e instanceof Error) return `The request failed: ${e.message}`;
  return "The request failed";
}

/** An alert with the error's words (role alert: read out when it appears). */
export function errorBox(e: unknown): HTMLElement {
  return h("p", { class: "error", role: "alert" }, errorText(e));
}

/** Shows "Loading…" in el when work takes longer than 200 ms; then replaces it with what
 * render gives, or with the error. */
export async function loading<T>(el: Element, work: Promise<T>, render: (value: T) => Child): Promise<void> {
  const timer = window.setTimeout(() => fill(el, h("p", { class: "loading", role: "status" }, "Loading…")), 200);
  el.setAttribute("aria-busy", "true");
  try {
    const value = await work;
    fill(el, render(value));
  } catch (e) {
    fill(el, errorBox(e));
  } finally {
    window.clearTimeout(timer);
    el.removeAttribute("aria-busy");
  }
}

/** A form's submit: the button is disabled while it runs (with "Working…" past 200 ms), each
 * error shown beside its field (the `field` of a validation error) or above the button. */
export function onSubmit(form: HTMLFormElement, run: (data: FormData) => Promise<void>): void {
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const button = form.querySelector<HTMLButtonElement>("button[type=submit]");
    form.querySelectorAll(".field-error, .form-error").forEach((n) => n.remove());
    form.querySelectorAll("[aria-invalid]").forEach((n) => n.removeAttribute("aria-invalid"));
    const label = button?.textContent ?? "";
    const timer = window.setTimeout(() => button && (button.textContent = "Working…"), 200);
    if (button) button.disabled = true;
    form.setAttribute("aria-busy", "true");
    try {
      await run(new FormData(form));
    } catch (e) {
      showFormError(form, e);
    } finally {
      window.clearTimeout(timer);
      form.removeAttribute("aria-busy");
      if (button) (button.disabled = false), (button.textContent = label);
    }
  });
}

export function showFormError(form: HTMLFormElement, e: unknown): void {
  const field = e instanceof MarketplaceError ? e.field : undefined;
  const input = field ? form.querySelector<HTMLElement>(`[name="${CSS.escape(field)}"]`) : null;
  if (input) {
    const id = `${input.id || field}-error`;
    input.setAttribute("aria-invalid", "true");
    input.setAttribute("aria-describedby", id);
    input.closest(".field")?.append(h("p", { class: "field-error error", id, role: "alert" }, errorText(e)));
    input.focus();
    return;
  }
  const button = form.querySelector("button[type=submit]");
  const box = h("p", { class: "form-error error", role: "alert" }, errorText(e));
  if (button) button.before(box);
  else form.append(box);
}

let ids = 0;
/** A labelled control: <div class=field><label for>…</label><input id name></div>. */
export function field(label: string, control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement, hint?: string): HTMLElement {
  if (!control.id) control.id = `f${++ids}`;
  const hintEl = hint ? h("p", { class: "hint", id: `${control.id}-hint` }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  return h("div", { class: "field" }, h("label", { for: control.id }, label), control, hintEl);
}

export function input(name: string, attrs: Attrs = {}): HTMLInputElement {
  return h("input", { name, type: "text", ...attrs });
}

export function select(name: string, options: [string, string][], value?: string | null): HTMLSelectElement {
  return h("select", { name }, options.map(([v, text]) => h("option", { value: v, selected: v === (value ?? "") }, text)));
}

/** A table with a caption (its accessible name) and a header row. */
export function table<T>(caption: string, columns: [string, (row: T) => Child][], rows: T[], empty = "Nothing here."): HTMLElement {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h("div", { class: "table-wrap", role: "region", "aria-label": caption, tabindex: 0 },
    h("table", null,
      h("caption", null, caption),
      h("thead", null, h("tr", null, columns.map(([title]) => h("th", { scope: "col" }, title)))),
      h("tbody", null, rows.map((row) => h("tr", null, columns.map(([, cell]) => h("td", null, cell(row))))))));
}

/** A list read page by page: load(cursor) gives a page's rows and the next cursor; a "Load more"
 * button asks for the next page. */
export function pagedList<T>(
  caption: string,
  columns: [string, (row: T) => Child][],
  load: (cursor: string | undefined) => Promise<{ rows: T[]; next: string | undefined }>,
  empty = "Nothing here.",
): HTMLElement {
  const box = h("div", { class: "paged" });
  const rows: T[] = [];
  const more = async (cursor: string | undefined, focusRow: number) => {
    const status = h("p", { class: "loading", role: "status" });
    const timer = window.setTimeout(() => (status.textContent = "Loading…"), 200);
    box.append(status);
    try {
      const page = await load(cursor);
      rows.push(...page.rows);
      const tableEl = table(caption, columns, rows, empty);
      const button = page.next
        ? h("button", { type: "button", class: "secondary", onclick: () => void more(page.next, rows.length) }, "Load more")
        : null;
      fill(box, tableEl, button, h("p", { class: "count", role: "status" }, rows.length ? `${rows.length} shown${page.next ? ", more to load" : ""}` : ""));
      if (focusRow > 0) box.querySelectorAll<HTMLElement>("tbody tr")[focusRow]?.querySelector<HTMLElement>("a, button")?.focus();
    } catch (e) {
      status.remove();
      box.append(errorBox(e));
    } finally {
      window.clearTimeout(timer);
    }
  };
  void more(undefined, 0);
  return box;
}

/** A list the API answers whole, shown page by page all the same ("Show more"). */
export function shownInPages<T>(caption: string, columns: [string, (row: T) => Child][], rows: T[], empty = "Nothing here.", size = 50): HTMLElement {
  return pagedList(caption, columns, async (cursor) => {
    const page = cursor ? Number(cursor) : 0;
    const next = (page + 1) * size < rows.length ? String(page + 1) : undefined;
    return { rows: rows.slice(page * size, (page + 1) * size), next };
  }, empty);
}

/** The cursor of a list answer's next page, from its Link header. */
export function nextCursor(response: Response): string | undefined {
  const link = response.headers.get("Link");
  const m = link && /<([^>]+)>\s*;\s*rel="?next"?/.exec(link);
  if (!m || !m[1]) return undefined;
  return new URL(m[1], location.origin).searchParams.get("cursor") ?? undefined;
}

export function badge(text: string, kind = ""): HTMLElement {
  return h("span", { class: `badge ${kind}` }, text.replace(/_/g, " "));
}

export function dl(pairs: [string, Child][]): HTMLElement {
  return h("dl", { class: "facts" }, pairs.map(([k, v]) => [h("dt", null, k), h("dd", null, v)]));
}
