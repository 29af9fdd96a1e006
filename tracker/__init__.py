"""tracker."""
