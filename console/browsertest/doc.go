// Package browsertest drives the review console (package console) in a
// real headless Chromium with chromedp, against a real redis-server. It is
// a module of its own so that chromedp stays out of the core module; it
// holds tests only.
package browsertest
