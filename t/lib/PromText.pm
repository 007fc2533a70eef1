package PromText;

# The Prometheus text exposition format 0.0.4 for the tests: a strict
# reader (one TYPE and HELP per family, counters end in _total, samples of
# a family contiguous, histograms as NAME_bucket{le}/NAME_sum/NAME_count
# with cumulative buckets ending in +Inf, no duplicate series), and
# `promtool check metrics` when the Debian package prometheus is
# installed.

use strict;
use warnings;

use Test::More;
use OmniTest ();

# a strict reader of the text exposition format 0.0.4; returns
# ({ "name{labels}" => value }, [errors])
sub parse {
    my ($text) = @_;

    my (%series, %type, %help, %done, @err);
    my $family = '';
    my $name_re = qr/[a-zA-Z_:][a-zA-Z0-9_:]*/;
    my $label_re = qr/[a-zA-Z_][a-zA-Z0-9_]*/;
    my $value_re = qr/[-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|NaN|Inf)/;

    push @err, 'does not end with a newline' unless $text =~ /\n\z/;

    my $n = 0;
    for my $line (split /\n/, $text) {
        $n++;

        if ($line =~ /^# HELP ($name_re) (.*)$/) {
            push @err, "line $n: second HELP for $1" if $help{$1}++;
            push @err, "line $n: bad escape in HELP"
                if $2 =~ /\\[^\\n]/;
            next;
        }

        if ($line =~ /^# TYPE ($name_re) (counter|gauge|histogram|summary|untyped)$/) {
            push @err, "line $n: second TYPE for $1" if $type{$1};
            push @err, "line $n: TYPE after samples of $1" if $done{$1};
            $type{$1} = $2;
            push @err, "line $n: counter $1 does not end in _total"
                if $2 eq 'counter' && $1 !~ /_total$/;
            next;
        }

        if ($line =~ /^#/) {
            push @err, "line $n: unexpected comment: $line";
            next;
        }

        unless ($line =~ /^($name_re)(?:\{(.*)\})? ($value_re)$/) {
            push @err, "line $n: not a sample: $line";
            next;
        }

        my ($name, $labels, $value) = ($1, $2 // '', $3);

        # a histogram's samples: NAME_bucket (with le), NAME_sum, NAME_count
        my $fam = $name;
        if ($name =~ /^(.+)_(bucket|sum|count)$/
            && ($type{$1} // '') eq 'histogram')
        {
            $fam = $1;
            push @err, "line $n: $name without le"
                if $2 eq 'bucket' && $labels !~ /(?:^|,)le="[^"]+"/;
        }

        if (!$type{$fam}) {
            push @err, "line $n: $name has no TYPE";
        } elsif ($type{$fam} eq 'histogram' && $fam eq $name) {
            push @err, "line $n: histogram $name has a plain sample";
        }

        if ($fam ne $family) {
            push @err, "line $n: samples of $fam are not contiguous"
                if $done{$fam};
            $done{$family} = 1 if $family;
            $family = $fam;
        }

        my @l;
        my $rest = $labels;
        while (length $rest) {
            unless ($rest =~ s/^($label_re)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)//) {
                push @err, "line $n: bad labels: {$labels}";
                last;
            }
            push @l, "$1=\"$2\"";
        }

        my $key = $name . (@l ? '{' . join(',', sort @l) . '}' : '');
        push @err, "line $n: duplicate series $key" if exists $series{$key};
        $series{$key} = $value;
    }

    for my $f (keys %type) {
        push @err, "$f has a TYPE but no HELP" unless $help{$f};
    }

    return (\%series, \@err);
}

# the buckets of each histogram series are cumulative and end in +Inf
sub check_histograms {
    my ($s) = @_;
    my (%by, @err);

    for my $k (keys %$s) {
        next unless $k =~ /^(\w+)_bucket\{(.*)\}$/;
        my ($name, $l) = ($1, $2);
        my ($le) = $l =~ /le="([^"]+)"/;
        (my $rest = $l) =~ s/(^|,)le="[^"]+"//;
        $rest =~ s/^,//;
        push @{$by{"$name\{$rest\}"}}, [$le eq '+Inf' ? 9**9**9 : $le,
                                        $s->{$k}];
    }

    for my $series (sort keys %by) {
        my @b = sort { $a->[0] <=> $b->[0] } @{$by{$series}};
        push @err, "$series: no +Inf bucket" unless $b[-1][0] == 9**9**9;
        for my $i (1 .. $#b) {
            push @err, "$series: buckets not cumulative"
                if $b[$i][1] < $b[$i - 1][1];
        }
        (my $count = $series) =~ s/\{/_count{/;
        my ($cname, $cl) = $series =~ /^(\w+)\{(.*)\}$/;
        my $ckey = "${cname}_count" . (length $cl ? "{$cl}" : '');
        push @err, "$series: _count differs from the +Inf bucket"
            unless defined $s->{$ckey} && $s->{$ckey} == $b[-1][1];
    }

    return @err;
}

# the parsed series; the strict reader and promtool as two tests
sub check {
    my ($t, $text, $name) = @_;

    my ($s, $err) = parse($text);
    push @$err, check_histograms($s);

    ok(!@$err, "$name: strict parser finds no problem")
        or diag(join("\n", @$err[0 .. ($#$err > 9 ? 9 : $#$err)]));

    SKIP: {
        my $promtool = `command -v promtool 2>/dev/null`;
        chomp $promtool;
        OmniTest::skip_without(
            'promtool not installed (Debian package prometheus)', 1)
            unless $promtool;

        my $f = $t->write_file('metrics.txt', $text);
        my $lint = `$promtool check metrics < $f 2>&1`;
        is($? >> 8, 0, "$name: promtool check metrics passes")
            or diag($lint);
    }

    return $s;
}

1;
